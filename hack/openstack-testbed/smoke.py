#!/usr/bin/python3
"""Smoke check of the capo-sharednet test bed (run by `testbed.sh smoke`).

The production story on the bed: the VM project shares a network with the
cluster project, the cluster project puts a server and a load balancer on it,
the unshare is refused while they hold ports, and succeeds once they are gone.
Exits non-zero at the first step that does not behave; cleans up either way.
"""

import sys
import time
import uuid

import openstack
from openstack import exceptions

TIMEOUT = 120
SUFFIX = uuid.uuid4().hex[:6]
NAME = f"smoke-{SUFFIX}"
T0 = time.time()


def step(msg):
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


def fail(msg):
    step(f"FAIL: {msg}")
    raise SystemExit(1)


def wait(what, fn, timeout=TIMEOUT):
    deadline = time.time() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.time() > deadline:
            fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.5)


def main(created):
    admin = openstack.connect(cloud="admin")
    vm = openstack.connect(cloud="vm-project")
    cluster = openstack.connect(cloud="cluster-project")
    cluster_project = cluster.current_project_id
    step(f"authenticated: vm-project {vm.current_project_id}, cluster-project {cluster_project}")

    net = vm.network.create_network(name=NAME)
    created["net"] = net.id
    subnet = vm.network.create_subnet(
        name=NAME, network_id=net.id, ip_version=4, cidr="10.250.0.0/24",
        allocation_pools=[{"start": "10.250.0.10", "end": "10.250.0.200"}],
    )
    net = vm.network.get_network(net.id)
    if not net.mtu:
        fail("network has no MTU")
    step(f"vm-project: network {net.id} mtu {net.mtu}, subnet {subnet.id} {subnet.cidr}")

    try:
        cluster.network.get_network(net.id)
        fail("cluster project sees the network before it is shared")
    except exceptions.NotFoundException:
        pass
    rbac = vm.network.create_rbac_policy(
        object_type="network", object_id=net.id, action="access_as_shared", target_project_id=cluster_project
    )
    created["rbac"] = rbac.id
    step(f"vm-project: shared with cluster-project (rbac {rbac.id})")

    try:
        p = cluster.network.create_port(
            network_id=net.id, fixed_ips=[{"subnet_id": subnet.id, "ip_address": "10.250.0.99"}]
        )
        cluster.network.delete_port(p.id)
        fail("a port with an explicit ip_address was allowed on the shared network")
    except exceptions.HttpException as e:
        if e.status_code != 403:
            raise
        step("cluster-project: port with ip_address refused (403), as in production")
    port = cluster.network.create_port(name=NAME, network_id=net.id, fixed_ips=[{"subnet_id": subnet.id}])
    created["port"] = port.id
    step(f"cluster-project: port {port.id} {port.fixed_ips[0]['ip_address']}")

    image = cluster.image.find_image("testbed-image", ignore_missing=False)
    flavor = cluster.compute.find_flavor("m1.tiny", ignore_missing=False)
    server = cluster.compute.create_server(
        name=NAME, image_id=image.id, flavor_id=flavor.id, networks=[{"port": port.id}]
    )
    created["server"] = server.id
    server = cluster.compute.wait_for_server(server, status="ACTIVE", failures=["ERROR"], interval=1, wait=TIMEOUT)
    bound = admin.network.get_port(port.id)
    step(f"cluster-project: server {server.id} ACTIVE, port bound to {bound.binding_host_id} ({bound.binding_vif_type})")

    lb = cluster.load_balancer.create_load_balancer(name=NAME, vip_subnet_id=subnet.id)
    created["lb"] = lb.id

    def lb_active():
        got = cluster.load_balancer.get_load_balancer(lb.id)
        if got.provisioning_status == "ERROR":
            fail(f"load balancer {lb.id} went to ERROR")
        return got if got.provisioning_status == "ACTIVE" else None

    lb = wait("load balancer ACTIVE", lb_active)
    vip_port = admin.network.get_port(lb.vip_port_id)
    if vip_port.network_id != net.id:
        fail(f"VIP port {vip_port.id} is on network {vip_port.network_id}, not {net.id}")
    step(f"cluster-project: load balancer {lb.id} ACTIVE, VIP {lb.vip_address} on real port {vip_port.id} "
         f"(project {vip_port.project_id})")
    listed = [x.id for x in cluster.load_balancer.load_balancers(vip_subnet_id=subnet.id)]
    if lb.id not in listed:
        fail("listing load balancers by vip_subnet_id misses it")

    try:
        vm.network.delete_rbac_policy(rbac.id)
        created.pop("rbac")
        fail("RBAC delete succeeded while the cluster project has ports on the network")
    except exceptions.ConflictException as e:
        step(f"vm-project: unshare refused with 409 while ports exist ({str(e.details or e)[:80]})")

    cluster.load_balancer.delete_load_balancer(lb.id, cascade=True)
    def lb_gone():
        try:
            return cluster.load_balancer.get_load_balancer(lb.id).provisioning_status == "DELETED"
        except exceptions.NotFoundException:
            return True

    wait("load balancer deleted", lb_gone)
    created.pop("lb")
    wait("VIP port deleted", lambda: admin.network.find_port(vip_port.id) is None)
    step("cluster-project: load balancer deleted (cascade), VIP port gone")

    cluster.compute.delete_server(server.id)
    cluster.compute.wait_for_delete(server, interval=1, wait=TIMEOUT)
    created.pop("server")
    cluster.network.delete_port(port.id)
    created.pop("port")
    step("cluster-project: server and port deleted")

    vm.network.delete_rbac_policy(rbac.id)
    created.pop("rbac")
    try:
        cluster.network.get_network(net.id)
        fail("cluster project still sees the network after the unshare")
    except exceptions.NotFoundException:
        pass
    step("vm-project: unshare succeeded; network is 404 to cluster-project")
    vm.network.delete_network(net.id)
    created.pop("net")
    step("vm-project: network deleted")


def cleanup(created):
    if not created:
        return
    step(f"cleaning up {sorted(created)}")
    admin = openstack.connect(cloud="admin")
    for kind, fn in (
        ("lb", lambda i: admin.load_balancer.delete_load_balancer(i, cascade=True, ignore_missing=True)),
        ("server", lambda i: admin.compute.delete_server(i, ignore_missing=True)),
    ):
        if kind in created:
            try:
                fn(created[kind])
            except Exception as e:  # best effort
                print(f"  cleanup {kind}: {e}")
    deadline = time.time() + TIMEOUT
    while time.time() < deadline:
        try:
            if "net" in created:
                for p in admin.network.ports(network_id=created["net"]):
                    admin.network.delete_port(p.id, ignore_missing=True)
                if "rbac" in created:
                    admin.network.delete_rbac_policy(created["rbac"], ignore_missing=True)
                admin.network.delete_network(created["net"], ignore_missing=True)
            return
        except exceptions.SDKException:
            time.sleep(1)


if __name__ == "__main__":
    created = {}
    ok = False
    try:
        main(created)
        ok = True
    finally:
        if not ok:
            cleanup(created)
    step("smoke: PASS")
    sys.exit(0)
