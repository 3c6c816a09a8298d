#!/usr/bin/python3
"""Seed the capo-sharednet test bed through openstacksdk (called by testbed.sh).

  seed.py identities            projects, users, roles, catalog (idempotent)
  seed.py resources ID_FILE     image testbed-image, flavor m1.tiny
  seed.py ready TIMEOUT HOST    wait for nova-compute, its hypervisor and the
                                linuxbridge agent on HOST

Reads the `admin` cloud of $OS_CLIENT_CONFIG_FILE (written by testbed.sh).
"""

import sys
import time

import openstack
from openstack import exceptions

IP = "127.0.0.1"
SERVICE_PASS = "testbed-service"
# name: (project, password, roles)
USERS = {
    "vm-user": ("vm-project", "testbed-vm", ["member", "load-balancer_member"]),
    "cluster-user": ("cluster-project", "testbed-cluster", ["member", "load-balancer_member"]),
    # A second tenant: what two clusters of two projects cost the VM project.
    "other-user": ("other-project", "testbed-other", ["member", "load-balancer_member"]),
}
# Service users get admin and service (Nova->Neutron with
# service_token_roles_required needs the service role).
SERVICE_USERS = ["nova", "neutron", "glance", "placement", "octavia"]
CATALOG = [
    ("nova", "compute", f"http://{IP}:8774/v2.1"),
    ("neutron", "network", f"http://{IP}:9696"),
    ("glance", "image", f"http://{IP}:9292"),
    ("placement", "placement", f"http://{IP}:8778"),
    ("octavia", "load-balancer", f"http://{IP}:9876"),
]
IMAGE = "testbed-image"
FLAVOR = "m1.tiny"


def admin():
    return openstack.connect(cloud="admin")


def ensure_role(conn, name):
    return conn.identity.find_role(name) or conn.identity.create_role(name=name)


def ensure_project(conn, name, domain):
    return conn.identity.find_project(name, domain_id=domain.id) or conn.identity.create_project(
        name=name, domain_id=domain.id, description="capo-sharednet test bed"
    )


def ensure_user(conn, name, password, project, domain):
    user = conn.identity.find_user(name, domain_id=domain.id)
    if user is None:
        return conn.identity.create_user(
            name=name, password=password, domain_id=domain.id, default_project_id=project.id
        )
    return conn.identity.update_user(user, password=password)


def grant(conn, project, user, role):
    have = conn.identity.role_assignments_filter(project=project, user=user)
    if role.id not in {r.id for r in have}:
        conn.identity.assign_project_role_to_user(project, user, role)


def identities():
    conn = admin()
    domain = conn.identity.find_domain("default")
    roles = {r: ensure_role(conn, r) for r in ["admin", "member", "reader", "service", "load-balancer_member"]}
    service_project = ensure_project(conn, "service", domain)
    for name in SERVICE_USERS:
        user = ensure_user(conn, name, SERVICE_PASS, service_project, domain)
        for r in ("admin", "service"):
            grant(conn, service_project, user, roles[r])
    for name, (project_name, password, role_names) in USERS.items():
        project = ensure_project(conn, project_name, domain)
        user = ensure_user(conn, name, password, project, domain)
        for r in role_names:
            grant(conn, project, user, roles[r])
    for name, kind, url in CATALOG:
        service = conn.identity.find_service(name) or conn.identity.create_service(name=name, type=kind)
        have = {e.interface for e in conn.identity.endpoints(service_id=service.id)}
        for interface in ("public", "internal", "admin"):
            if interface not in have:
                conn.identity.create_endpoint(
                    service_id=service.id, interface=interface, url=url, region_id="RegionOne"
                )
    print("identities: admin, vm-project/vm-user, cluster-project/cluster-user, other-project/other-user, service users", SERVICE_USERS)


def resources(id_file):
    conn = admin()
    image = conn.image.find_image(IMAGE)
    if image is None:
        image = conn.image.create_image(
            name=IMAGE,
            data=b"\0" * (1 << 20),
            disk_format="raw",
            container_format="bare",
            visibility="public",
            validate_checksum=False,
            wait=True,
        )
    deadline = time.time() + 60
    while image.status != "active":
        if time.time() > deadline:
            sys.exit(f"image {IMAGE} is {image.status}")
        time.sleep(0.5)
        image = conn.image.get_image(image.id)
    with open(id_file, "w") as f:
        f.write(image.id)
    if conn.compute.find_flavor(FLAVOR) is None:
        conn.compute.create_flavor(name=FLAVOR, id="1", ram=512, vcpus=1, disk=1, is_public=True)
    print(f"resources: image {IMAGE} ({image.id}), flavor {FLAVOR}")


def ready(timeout, host):
    conn = admin()
    deadline = time.time() + timeout
    missing = "?"
    while time.time() < deadline:
        try:
            compute = [s for s in conn.compute.services(binary="nova-compute", host=host) if s.state == "up"]
            hypervisors = list(conn.compute.hypervisors())
            agents = [a for a in conn.network.agents(binary="neutron-linuxbridge-agent", host=host) if a.is_alive]
            missing = ", ".join(
                what
                for what, ok in (
                    ("nova-compute service up", compute),
                    ("hypervisor", hypervisors),
                    ("linuxbridge agent alive", agents),
                )
                if not ok
            )
            if not missing:
                return
        except exceptions.SDKException as e:
            missing = str(e)
        time.sleep(1)
    sys.exit(f"not ready after {timeout}s: {missing}")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "identities":
        identities()
    elif cmd == "resources":
        resources(sys.argv[2])
    elif cmd == "ready":
        ready(float(sys.argv[2]), sys.argv[3])
    else:
        sys.exit(__doc__)
