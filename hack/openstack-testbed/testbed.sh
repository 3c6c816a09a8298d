#!/usr/bin/env bash
# A real OpenStack (Debian 12 packages, release Zed) on 127.0.0.1 for the tests:
# MariaDB, RabbitMQ, memcached, Keystone, Placement, Glance, Neutron (ML2
# linuxbridge + l2population, a running linuxbridge agent), Nova (fake virt
# driver) and Octavia (amphora provider, no-op amphora/compute drivers, real
# Neutron VIP ports).
#
# Usage: testbed.sh install|start|stop|status|reset|smoke|clouds
#   install  apt-get the packages (once) and register the Octavia test driver
#   start    start every service (first start also creates the databases and
#            the identities, image and flavor), wait until every API answers
#   stop     end exactly the processes that start started
#   status   one line per service; exit 1 when any is down
#   reset    put the databases back to their state right after the first
#            start (flushes memcached); a running bed stays up, a stopped one stopped
#   smoke    run smoke.py against the running bed
#   clouds   (re)write clouds.yaml and print its path
# Every subcommand is idempotent. Runs as root; PID 1 need not be systemd.
#
# Environment: TESTBED_STATE (default /var/lib/capo-sharednet-testbed) holds
# generated config, databases, logs and pid files; TESTBED_ARTIFACTS (default
# <repo>/_artifacts/openstack) gets clouds.yaml and a link to the logs;
# TESTBED_WAIT (default 240) bounds each wait in seconds.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
STATE=${TESTBED_STATE:-/var/lib/capo-sharednet-testbed}
ARTIFACTS=${TESTBED_ARTIFACTS:-$ROOT/_artifacts/openstack}
WAIT=${TESTBED_WAIT:-240}
ETC=$STATE/etc
RUN=$STATE/run
LOGD=$STATE/log
PY=/usr/bin/python3 # OpenStack's Python (python3 on PATH may be another one)
HOST=testbed        # host name of nova-compute and the linuxbridge agent
IP=127.0.0.1
CLOUDS=$ARTIFACTS/clouds.yaml
export no_proxy=127.0.0.1,localhost NO_PROXY=127.0.0.1,localhost

# Credentials: a loopback-only test bed, so fixed and readable on purpose.
DB_USER=testbed
DB_PASS=testbed-db
SERVICE_PASS=testbed-service
ADMIN_PASS=testbed-admin
VM_PASS=testbed-vm
CLUSTER_PASS=testbed-cluster
OTHER_PASS=testbed-other
RABBIT_URL="rabbit://guest:guest@$IP:5672/" # guest may log in from loopback
DATABASES=(keystone placement glance neutron nova_api nova nova_cell0 octavia)

# Services in start order. Infrastructure first; stop goes in reverse.
INFRA=(mariadb memcached epmd rabbitmq)
OPENSTACK=(keystone placement glance neutron-server neutron-linuxbridge-agent
  nova-api nova-conductor nova-scheduler nova-compute octavia-api octavia-worker)
ALL=("${INFRA[@]}" "${OPENSTACK[@]}")

declare -A PORT=([mariadb]=3306 [memcached]=11211 [epmd]=4369 [rabbitmq]=5672
  [keystone]=5000 [placement]=8778 [glance]=9292 [neutron-server]=9696
  [nova-api]=8774 [octavia-api]=9876)
# The API each readiness wait asks (any HTTP answer below 500 counts).
declare -A API=([keystone]=/v3 [placement]=/ [glance]=/ [neutron-server]=/
  [nova-api]=/ [octavia-api]=/)

PACKAGES=(
  mariadb-server mariadb-client rabbitmq-server memcached
  python3-pymysql python3-memcache python3-openstackclient python3-openstacksdk
  uwsgi-core uwsgi-plugin-python3 curl openssl iproute2 sudo
  keystone placement-api glance-api
  neutron-server neutron-linuxbridge-agent
  nova-api nova-conductor nova-scheduler python3-nova
  octavia-api octavia-worker
  # Not services: cloud-init's converter and netplan render what Nova serves
  # an attached node (test/noderoutes).
  cloud-init netplan.io python3-yaml
  # The linuxbridge agent's iptables firewall (security groups, port
  # security) and ARP protection on plugged ports, and what the data-path
  # test sends with (test/dataplane).
  iptables ipset ebtables conntrack iputils-ping netcat-openbsd
)

log() { printf '%s testbed: %s\n' "$(date +%T)" "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}
need_root() { [ "$(id -u)" = 0 ] || die "$1 must run as root"; }

# ---------------------------------------------------------------- install

cmd_install() {
  need_root install
  local missing=() p q sel=""
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${#missing[@]} packages: ${missing[*]}"
    # Skip every package's own db/rabbit/keystone/endpoint configuration:
    # start writes its own configuration.
    for q in keystone:keystone/configure_db keystone:keystone/create-admin-tenant \
      keystone:keystone/register-endpoint \
      glance-common:glance/configure_db glance-common:glance/configure_rabbit \
      glance-common:glance/configure_ksat glance-common:glance/ksat-create-service-user \
      glance-api:glance/configure_api-endpoint \
      neutron-common:neutron/configure_db neutron-common:neutron/configure_rabbit \
      neutron-common:neutron/configure_ksat neutron-common:neutron/configure_nova \
      neutron-common:neutron/ksat-create-service-user \
      nova-common:nova/configure_db nova-common:nova/configure_rabbit \
      nova-common:nova/configure_ksat nova-common:nova/configure_neutron \
      nova-common:nova/configure_placement nova-common:nova/ksat-create-service-user \
      nova-api:novaapi/configure_db nova-api:nova/configure_api-endpoint \
      placement-common:placement/configure_db placement-common:placement/configure_ksat \
      placement-common:placement/ksat-create-service-user \
      placement-api:placement/configure_api-endpoint \
      octavia-common:octavia/configure_db octavia-common:octavia/configure_rabbit \
      octavia-common:octavia/configure_ksat octavia-common:octavia/ksat-create-service-user \
      octavia-api:octavia/configure_api-endpoint \
      mariadb-server:mariadb-server/postrm_remove_databases; do
      sel+="${q%%:*} ${q#*:} boolean false"$'\n'
    done
    printf '%s' "$sel" | debconf-set-selections
    # No daemon may start from a postinst (there is no init system to own it).
    local created_policy=0 rc=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
      chmod 755 /usr/sbin/policy-rc.d
      created_policy=1
    fi
    (
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq
      apt-get install -y -q --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${missing[@]}"
    ) || rc=$?
    [ $created_policy = 0 ] || rm -f /usr/sbin/policy-rc.d
    [ $rc = 0 ] || die "apt-get install failed (exit $rc)"
  else
    log "packages already installed"
  fi
  install_octavia_driver
  log "installed; next: $0 start"
}

# The Octavia worker's network driver: no-op except a real Neutron VIP port.
# Installed as a module plus a dist-info that registers the entry point.
install_octavia_driver() {
  local site
  site=$($PY -c 'import sys; print([p for p in sys.path if p.startswith("/usr/local/lib/python3") and p.endswith("dist-packages")][0])') ||
    die "no /usr/local dist-packages on $PY's sys.path"
  local dist=$site/capo_testbed_octavia-1.0.dist-info
  mkdir -p "$dist"
  install -m 644 "$HERE/octavia_driver/capo_testbed_octavia.py" "$site/capo_testbed_octavia.py"
  printf 'Metadata-Version: 2.1\nName: capo-testbed-octavia\nVersion: 1.0\n' >"$dist/METADATA"
  printf '[octavia.network.drivers]\ntestbed_vip_driver = capo_testbed_octavia:VIPOnlyNetworkDriver\n' >"$dist/entry_points.txt"
  printf 'capo_testbed_octavia.py,,\n%s/METADATA,,\n%s/entry_points.txt,,\n' "${dist##*/}" "${dist##*/}" >"$dist/RECORD"
  $PY - <<'EOF' || die "the Octavia test driver does not load"
from importlib.metadata import entry_points
eps = [e for e in entry_points(group="octavia.network.drivers") if e.name == "testbed_vip_driver"]
assert eps, "entry point testbed_vip_driver not registered"
eps[0].load()
EOF
}

installed() {
  local b
  for b in mariadbd memcached epmd uwsgi keystone-manage neutron-server neutron-linuxbridge-agent \
    nova-manage glance-api octavia-worker octavia-db-manage placement-manage; do
    command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || return 1
  done
  [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || return 1
  $PY -c 'from importlib.metadata import entry_points as e; assert [x for x in e(group="octavia.network.drivers") if x.name == "testbed_vip_driver"]' 2>/dev/null
}

# ---------------------------------------------------------------- processes

# starttime <pid>: the kernel's start time of a process (guards against a
# recycled pid), empty when it is gone.
starttime() {
  local s
  { read -r s <"/proc/$1/stat"; } 2>/dev/null || return 0
  s=${s##*) }
  # shellcheck disable=SC2086 # split /proc/<pid>/stat into its fields
  set -- $s
  [ "$1" = Z ] && return 0
  echo "${20}"
}

# session_members <sid> <min starttime> [outside-group]: pids in that session
# started no earlier than its leader (only those outside the leader's process
# group with a third argument).
session_members() {
  local sid=$1 min=$2 outside=${3:-} f s pid
  for f in /proc/[0-9]*/stat; do
    { read -r s <"$f"; } 2>/dev/null || continue
    pid=${s%% *}
    s=${s##*) }
    # shellcheck disable=SC2086 # split /proc/<pid>/stat into its fields
    set -- $s
    if ! { [ "$4" = "$sid" ] && [ "$1" != Z ] && [ "${20}" -ge "$min" ]; }; then continue; fi
    [ -n "$outside" ] && [ "$3" = "$sid" ] && continue
    echo "$pid"
  done
  return 0
}

is_up() {
  local pidf=$RUN/$1.pid pid st
  [ -s "$pidf" ] || return 1
  read -r pid st <"$pidf"
  [ -n "$pid" ] && [ "$(starttime "$pid")" = "$st" ]
}

# spawn <name> <cmd...>: start cmd in its own session, output to its log,
# pid and start time in its pid file. No-op when it runs already.
spawn() {
  local name=$1 pidf=$RUN/$1.pid log=$LOGD/$1.log pid st i port=${PORT[$1]:-}
  shift
  is_up "$name" && return 0
  if [ -n "$port" ] && ss -Hltn "sport = :$port" | grep -q .; then
    die "$name: port $port is already taken by a process this test bed did not start ($(ss -Hltnp "sport = :$port" | head -1))"
  fi
  rm -f "$pidf" "$pidf.tmp"
  printf '==== %s start: %s\n' "$(date -Is)" "$*" >>"$log"
  # fd 9 is the test bed lock: the service must not inherit it.
  # shellcheck disable=SC2016 # expanded by the inner bash: its own pid
  setsid bash -c 'echo $$ >"$0.tmp"; exec "$@"' "$pidf" "$@" </dev/null >>"$log" 2>&1 9>&- &
  for i in $(seq 100); do
    [ -s "$pidf.tmp" ] && break
    sleep 0.05
  done
  pid=$(cat "$pidf.tmp" 2>/dev/null) || die "$name did not start, see $log"
  rm -f "$pidf.tmp"
  st=$(starttime "$pid")
  [ -n "$st" ] || die "$name exited at once, see $log"
  echo "$pid $st" >"$pidf"
}

# stop_services <names...>: TERM each service's process group (and any
# process of its session that left the group), wait, then KILL what is left.
stop_services() {
  local name pid st p deadline
  declare -A sid min
  for name in "$@"; do
    [ -s "$RUN/$name.pid" ] || continue
    read -r pid st <"$RUN/$name.pid"
    sid[$name]=$pid
    min[$name]=$st
    if is_up "$name"; then
      kill -TERM -- "-$pid" 2>/dev/null || true
      for p in $(session_members "$pid" "$st" outside); do kill -TERM "$p" 2>/dev/null || true; done
    else # leader gone: only what is provably left of its session
      for p in $(session_members "$pid" "$st"); do kill -TERM "$p" 2>/dev/null || true; done
    fi
  done
  # oslo.service waits graceful_shutdown_timeout (5 s here) for busy threads.
  deadline=$((SECONDS + 20))
  for name in "${!sid[@]}"; do
    while [ -n "$(session_members "${sid[$name]}" "${min[$name]}")" ]; do
      if [ $SECONDS -ge $deadline ]; then
        log "$name did not end on TERM; killing"
        for p in $(session_members "${sid[$name]}" "${min[$name]}"); do kill -KILL "$p" 2>/dev/null || true; done
        sleep 0.5
        break
      fi
      sleep 0.2
    done
    rm -f "$RUN/$name.pid"
    log "stopped $name"
  done
}

port_open() { (exec 3<>"/dev/tcp/$IP/$1") 2>/dev/null; }

# wait_api <name>: bounded wait for the service's HTTP API.
wait_api() {
  local name=$1 url="http://$IP:${PORT[$1]}${API[$1]}" code deadline=$((SECONDS + WAIT))
  while :; do
    is_up "$name" || die "$name exited; see $LOGD/$name.log"
    code=$(curl -s -o /dev/null -m 10 -w '%{http_code}' "$url" || true)
    case $code in [1-4]??) return 0 ;; esac
    [ $SECONDS -lt $deadline ] || die "$name does not answer at $url after ${WAIT}s (last HTTP code $code); see $LOGD/$name.log"
    sleep 0.5
  done
}

wait_port() {
  local name=$1 deadline=$((SECONDS + WAIT))
  until port_open "${PORT[$name]}"; do
    is_up "$name" || die "$name exited; see $LOGD/$name.log"
    [ $SECONDS -lt $deadline ] || die "$name does not listen on $IP:${PORT[$name]} after ${WAIT}s; see $LOGD/$name.log"
    sleep 0.2
  done
}

# ---------------------------------------------------------------- config

db_url() { echo "mysql+pymysql://$DB_USER:$DB_PASS@$IP/$1?charset=utf8"; }

authtoken() { # authtoken <service user>
  cat <<EOF
[keystone_authtoken]
www_authenticate_uri = http://$IP:5000
auth_url = http://$IP:5000
memcached_servers = $IP:11211
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = service
username = $1
password = $SERVICE_PASS
service_token_roles_required = true
region_name = RegionOne
EOF
}

ksauth() { # ksauth <section> <user>: keystoneauth password options
  cat <<EOF
[$1]
auth_url = http://$IP:5000
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = service
username = $2
password = $SERVICE_PASS
region_name = RegionOne
EOF
}

# Each connection to RabbitMQ: no heartbeats on loopback (eventlet services
# under uwsgi were seen to hang after idling with heartbeat threads).
messaging() {
  cat <<EOF
[oslo_messaging_rabbit]
heartbeat_timeout_threshold = 0

[oslo_messaging_notifications]
driver = noop
EOF
}

write_configs() {
  mkdir -p "$ETC"/{keystone,placement,glance,neutron,nova,octavia,rabbitmq} "$RUN" "$LOGD" \
    "$STATE"/{keystone,glance/images,glance/staging,neutron,nova/instances,octavia,rabbitmq}

  cat >"$ETC/keystone/keystone.conf" <<EOF
[DEFAULT]
log_dir =
use_stderr = true

[database]
connection = $(db_url keystone)

[token]
provider = fernet

[fernet_tokens]
key_repository = $STATE/keystone/fernet-keys

[credential]
key_repository = $STATE/keystone/credential-keys

[cache]
enabled = true
backend = oslo_cache.memcache_pool
memcache_servers = $IP:11211
EOF

  {
    cat <<EOF
[DEFAULT]
use_stderr = true

[api]
auth_strategy = keystone

[placement_database]
connection = $(db_url placement)

EOF
    authtoken placement
  } >"$ETC/placement/placement.conf"

  {
    cat <<EOF
[DEFAULT]
bind_host = $IP
bind_port = 9292
workers = 0
graceful_shutdown_timeout = 5
use_stderr = true
node_staging_uri = file://$STATE/glance/staging
enabled_import_methods = [glance-direct,web-download]

[database]
connection = $(db_url glance)

[glance_store]
stores = file,http
default_store = file
filesystem_store_datadir = $STATE/glance/images/

[paste_deploy]
flavor = keystone
config_file = /etc/glance/glance-api-paste.ini

[oslo_concurrency]
lock_path = $STATE/glance/lock

EOF
    authtoken glance
    echo
    messaging
  } >"$ETC/glance/glance-api.conf"

  {
    cat <<EOF
[DEFAULT]
host = $HOST
bind_host = $IP
bind_port = 9696
core_plugin = ml2
graceful_shutdown_timeout = 5
service_plugins = router
auth_strategy = keystone
allow_overlapping_ips = true
api_workers = 1
rpc_workers = 1
rpc_state_report_workers = 0
api_paste_config = /etc/neutron/api-paste.ini
state_path = $STATE/neutron
transport_url = $RABBIT_URL
notify_nova_on_port_status_changes = true
notify_nova_on_port_data_changes = true
use_stderr = true

[database]
connection = $(db_url neutron)

[experimental]
linuxbridge = true

[oslo_concurrency]
lock_path = $STATE/neutron/lock

[agent]
root_helper =

EOF
    for s in privsep privsep_dhcp_release privsep_ovs_vsctl privsep_namespace privsep_conntrack privsep_link; do
      printf '[%s]\nhelper_command = privsep-helper --config-file %s --config-file %s\n\n' \
        "$s" "$ETC/neutron/neutron.conf" "$ETC/neutron/linuxbridge_agent.ini"
    done
    authtoken neutron
    echo
    ksauth nova nova
    echo
    # The segments plugin (loaded by default) tells Placement about segments.
    ksauth placement placement
    echo
    messaging
  } >"$ETC/neutron/neutron.conf"

  cat >"$ETC/neutron/ml2_conf.ini" <<EOF
[ml2]
type_drivers = flat,vlan,vxlan
tenant_network_types = vxlan
mechanism_drivers = linuxbridge,l2population
extension_drivers = port_security

[ml2_type_vxlan]
vni_ranges = 1:10000

[securitygroup]
enable_security_group = true
EOF

  cat >"$ETC/neutron/linuxbridge_agent.ini" <<EOF
[linux_bridge]
physical_interface_mappings =

[vxlan]
enable_vxlan = true
local_ip = $IP
l2_population = true

[securitygroup]
# As on a real cloud: security groups and port security (anti-spoofing)
# apply to every port plugged into the agent's bridges.
firewall_driver = iptables
enable_ipset = true
enable_security_group = true

[agent]
root_helper =
EOF

  {
    cat <<EOF
[DEFAULT]
host = $HOST
my_ip = $IP
transport_url = $RABBIT_URL
state_path = $STATE/nova
instances_path = $STATE/nova/instances
compute_driver = fake.FakeDriver
graceful_shutdown_timeout = 5
vif_plugging_is_fatal = false
vif_plugging_timeout = 0
enabled_apis = osapi_compute
use_stderr = true

[api]
auth_strategy = keystone

[api_database]
connection = $(db_url nova_api)

[database]
connection = $(db_url nova)

[wsgi]
api_paste_config = $ETC/nova/api-paste.ini

[conductor]
workers = 1

[scheduler]
workers = 1
discover_hosts_in_cells_interval = -1

[quota]
instances = 200
cores = 400
ram = 1024000

[vnc]
enabled = false

[oslo_concurrency]
lock_path = $STATE/nova/lock

[glance]
region_name = RegionOne

EOF
    authtoken nova
    echo
    ksauth service_user nova
    echo "send_service_user_token = true"
    echo
    ksauth neutron neutron
    echo
    ksauth placement placement
    echo
    messaging
  } >"$ETC/nova/nova.conf"
  cp /etc/nova/api-paste.ini "$ETC/nova/api-paste.ini"

  local certs=$STATE/octavia/certs
  {
    cat <<EOF
[DEFAULT]
transport_url = $RABBIT_URL
use_stderr = true
graceful_shutdown_timeout = 5

[api_settings]
bind_host = $IP
bind_port = 9876
auth_strategy = keystone
enabled_provider_drivers = amphora:The Octavia Amphora driver (no-op amphorae; real VIP ports).
default_provider_driver = amphora

[database]
connection = $(db_url octavia)

[health_manager]
bind_ip = $IP
bind_port = 5555
controller_ip_port_list = $IP:5555
heartbeat_key = testbed

[certificates]
cert_generator = local_cert_generator
cert_manager = local_cert_manager
storage_path = $certs/storage
ca_certificate = $certs/ca.pem
ca_private_key = $certs/ca.key
ca_private_key_passphrase = testbed
server_certs_key_passphrase = insecure-key-do-not-use-this-key

[controller_worker]
amphora_driver = amphora_noop_driver
compute_driver = compute_noop_driver
volume_driver = volume_noop_driver
image_driver = image_noop_driver
client_ca = $certs/ca.pem
loadbalancer_topology = SINGLE
workers = 1

[haproxy_amphora]
server_ca = $certs/ca.pem
client_cert = $certs/client.pem

[task_flow]
jobboard_enabled = false

[oslo_messaging]
topic = octavia_prov

[neutron]
region_name = RegionOne

[nova]
region_name = RegionOne

[glance]
region_name = RegionOne

EOF
    authtoken octavia
    echo
    ksauth service_auth octavia
    echo "memcached_servers = $IP:11211"
    echo
    messaging
  } >"$ETC/octavia/octavia.conf"
  # The API allocates the VIP port with the allowed-address-pairs driver; the
  # worker runs no-op but for the VIP port (octavia_driver/).
  printf '[controller_worker]\nnetwork_driver = allowed_address_pairs_driver\n' >"$ETC/octavia/octavia-api.conf"
  printf '[controller_worker]\nnetwork_driver = testbed_vip_driver\n' >"$ETC/octavia/octavia-worker.conf"

  cat >"$ETC/rabbitmq/rabbitmq.conf" <<EOF
listeners.tcp.1 = $IP:5672
disk_free_limit.absolute = 50MB
log.console = true
log.file = false
EOF
  echo '[{kernel, [{inet_dist_use_interface, {127,0,0,1}}]}].' >"$ETC/rabbitmq/advanced.config"
  echo '[].' >"$ETC/rabbitmq/enabled_plugins"
}

# A local CA for Octavia (amphora certificates are generated even for no-op
# amphorae), made once.
ensure_certs() {
  local d=$STATE/octavia/certs
  [ -s "$d/client.pem" ] && return 0
  mkdir -p "$d/storage"
  (
    cd "$d"
    openssl req -x509 -newkey rsa:2048 -passout pass:testbed -keyout ca.key -out ca.pem \
      -days 3650 -subj "/CN=capo-sharednet testbed CA" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr \
      -subj "/CN=octavia-controller" 2>/dev/null
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -passin pass:testbed \
      -CAcreateserial -out client.crt -days 3650 2>/dev/null
    cat client.crt client.key >client.pem
    chmod 600 ca.key client.key client.pem
  ) || die "could not create the Octavia CA in $d"
}

write_clouds() {
  mkdir -p "$ARTIFACTS"
  local tmp=$CLOUDS.tmp entry
  {
    echo "# Written by hack/openstack-testbed/testbed.sh; the test bed on $IP."
    echo "clouds:"
    for entry in "admin admin admin $ADMIN_PASS" "vm-project vm-project vm-user $VM_PASS" \
      "cluster-project cluster-project cluster-user $CLUSTER_PASS" "other-project other-project other-user $OTHER_PASS"; do
      # shellcheck disable=SC2086 # split the entry into its four words
      set -- $entry
      cat <<EOF
  $1:
    auth:
      auth_url: http://$IP:5000/v3
      project_name: $2
      project_domain_name: Default
      username: $3
      user_domain_name: Default
      password: $4
    region_name: RegionOne
    interface: public
    identity_api_version: 3
EOF
    done
  } >"$tmp"
  mv "$tmp" "$CLOUDS"
  ln -sfn "$LOGD" "$ARTIFACTS/logs"
}

# ---------------------------------------------------------------- starting

mysql_root() { mariadb --no-defaults -S "$RUN/mysqld.sock" -uroot "$@"; }

# end_service_connections closes every connection of the services' database user.
end_service_connections() {
  local id
  for id in $(mysql_root -N -e "SELECT id FROM information_schema.processlist WHERE user = '$DB_USER'"); do
    mysql_root -e "KILL CONNECTION $id" 2>/dev/null || true # it may have closed meanwhile
  done
}

spawn_service() {
  local name=$1
  case $name in
    mariadb)
      spawn mariadb /usr/sbin/mariadbd --no-defaults --user=root --datadir="$STATE/mysql" \
        --socket="$RUN/mysqld.sock" --pid-file="$RUN/mysqld.own.pid" --bind-address=$IP --port=3306 \
        --skip-name-resolve --skip-log-bin --max-connections=1000 --innodb-buffer-pool-size=128M \
        --innodb-log-file-size=32M --innodb-flush-log-at-trx-commit=0 --innodb-doublewrite=0 \
        --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
        --tmpdir=/tmp --log-error="$LOGD/mariadb.log"
      ;;
    memcached) spawn memcached /usr/bin/memcached -l $IP -p 11211 -U 0 -u memcache -m 64 -c 4096 ;;
    epmd) spawn epmd /usr/bin/epmd -address $IP -port 4369 ;;
    rabbitmq)
      # No broker state is worth keeping: every service declares its queues
      # again, and a clean node boots faster than a recovered one.
      is_up rabbitmq || rm -rf "$STATE/rabbitmq/mnesia"
      spawn rabbitmq env HOME="$STATE/rabbitmq" RABBITMQ_NODENAME=rabbit@localhost \
        RABBITMQ_NODE_IP_ADDRESS=$IP RABBITMQ_NODE_PORT=5672 RABBITMQ_DIST_PORT=25672 \
        ERL_EPMD_ADDRESS=$IP ERL_EPMD_PORT=4369 RABBITMQ_CONFIG_FILE="$ETC/rabbitmq/rabbitmq.conf" \
        RABBITMQ_ADVANCED_CONFIG_FILE="$ETC/rabbitmq/advanced.config" \
        RABBITMQ_ENABLED_PLUGINS_FILE="$ETC/rabbitmq/enabled_plugins" \
        RABBITMQ_MNESIA_BASE="$STATE/rabbitmq/mnesia" RABBITMQ_LOG_BASE="$LOGD" \
        RABBITMQ_LOGS=- RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="+S 1:1 +sbwt none +sbwtdcpu none +sbwtdio none" \
        /usr/lib/rabbitmq/bin/rabbitmq-server
      ;;
    keystone) spawn_uwsgi keystone 5000 /usr/bin/keystone-wsgi-public 2 2 --env "OS_KEYSTONE_CONFIG_DIR=$ETC/keystone" ;;
    placement) spawn_uwsgi placement 8778 /usr/bin/placement-api 1 4 --env "OS_PLACEMENT_CONFIG_DIR=$ETC/placement" ;;
    glance) spawn glance /usr/bin/glance-api --config-file "$ETC/glance/glance-api.conf" ;;
    neutron-server)
      spawn neutron-server /usr/bin/neutron-server --config-file "$ETC/neutron/neutron.conf" \
        --config-file "$ETC/neutron/ml2_conf.ini"
      ;;
    neutron-linuxbridge-agent)
      spawn neutron-linuxbridge-agent /usr/bin/neutron-linuxbridge-agent \
        --config-file "$ETC/neutron/neutron.conf" --config-file "$ETC/neutron/linuxbridge_agent.ini"
      ;;
    nova-api)
      # threads = 1: an eventlet app under uwsgi threads can hang (see ENVIRONMENT.md).
      spawn_uwsgi nova-api 8774 /usr/bin/nova-api-wsgi 2 1 --env "OS_NOVA_CONFIG_DIR=$ETC/nova"
      ;;
    nova-conductor) spawn nova-conductor /usr/bin/nova-conductor --config-file "$ETC/nova/nova.conf" ;;
    nova-scheduler) spawn nova-scheduler /usr/bin/nova-scheduler --config-file "$ETC/nova/nova.conf" ;;
    nova-compute)
      # From python3-nova: the nova-compute package would pull libvirt/qemu.
      spawn nova-compute $PY -c 'import sys; sys.argv[0] = "nova-compute"; from nova.cmd.compute import main; sys.exit(main())' \
        --config-file "$ETC/nova/nova.conf"
      ;;
    octavia-api)
      spawn_uwsgi octavia-api 9876 /usr/bin/octavia-wsgi 1 4 \
        --pyargv "--config-file $ETC/octavia/octavia.conf --config-file $ETC/octavia/octavia-api.conf"
      ;;
    octavia-worker)
      spawn octavia-worker /usr/bin/octavia-worker --config-file "$ETC/octavia/octavia.conf" \
        --config-file "$ETC/octavia/octavia-worker.conf"
      ;;
    *) die "unknown service $name" ;;
  esac
}

# uwsgi's http-socket closes each connection after one response: say so, or
# pooled clients (keystoneauth) reuse a dead connection and fail.
spawn_uwsgi() { # name port wsgi-file processes threads extra...
  local name=$1 port=$2 file=$3 procs=$4 threads=$5
  shift 5
  spawn "$name" /usr/bin/uwsgi --plugin python3 --master --die-on-term --need-app --lazy-apps \
    --http-socket "$IP:$port" --wsgi-file "$file" --processes "$procs" --threads "$threads" \
    --enable-threads --buffer-size 65535 --chdir "$STATE" \
    --add-header "Connection: close" --procname-prefix-spaced "testbed-$name" "$@"
}

# First start: databases, schemas, keystone bootstrap, nova cells.
init_databases() {
  log "first start: creating the databases (about a minute)"
  stop_services "${ALL[@]}"
  rm -rf "$STATE/mysql" "$STATE/rabbitmq" "$STATE/keystone" "$STATE/glance/images" "$STATE/snapshot.sql" \
    "$STATE/.seeded" "$STATE/seed-image-id"
  mkdir -p "$STATE/mysql" "$STATE/rabbitmq" "$STATE/keystone" "$STATE/glance/images"
  mariadb-install-db --no-defaults --user=root --datadir="$STATE/mysql" \
    --auth-root-authentication-method=socket --skip-test-db >"$LOGD/mariadb-install.log" 2>&1 ||
    die "mariadb-install-db failed; see $LOGD/mariadb-install.log"
  spawn_service mariadb
  wait_mysql
  local sql="CREATE USER IF NOT EXISTS '$DB_USER'@'%' IDENTIFIED BY '$DB_PASS'; GRANT ALL ON *.* TO '$DB_USER'@'%';" db
  for db in "${DATABASES[@]}"; do sql+=" CREATE DATABASE IF NOT EXISTS $db;"; done
  mysql_root -e "$sql"

  local k=$ETC/keystone/keystone.conf n=$ETC/nova/nova.conf pids=() rc=0 p
  (
    keystone-manage --config-file "$k" db_sync &&
      keystone-manage --config-file "$k" fernet_setup --keystone-user root --keystone-group root &&
      keystone-manage --config-file "$k" credential_setup --keystone-user root --keystone-group root &&
      keystone-manage --config-file "$k" bootstrap --bootstrap-password "$ADMIN_PASS" \
        --bootstrap-admin-url "http://$IP:5000/v3/" --bootstrap-internal-url "http://$IP:5000/v3/" \
        --bootstrap-public-url "http://$IP:5000/v3/" --bootstrap-region-id RegionOne
  ) >"$LOGD/db-sync-keystone.log" 2>&1 &
  pids+=($!)
  (
    neutron-db-manage --config-file "$ETC/neutron/neutron.conf" --config-file "$ETC/neutron/ml2_conf.ini" upgrade heads
  ) >"$LOGD/db-sync-neutron.log" 2>&1 &
  pids+=($!)
  (
    nova-manage --config-file "$n" api_db sync &&
      nova-manage --config-file "$n" cell_v2 map_cell0 --database_connection "$(db_url nova_cell0)" &&
      { nova-manage --config-file "$n" cell_v2 list_cells | grep -q ' cell1 ' ||
        nova-manage --config-file "$n" cell_v2 create_cell --name cell1; } &&
      nova-manage --config-file "$n" db sync
  ) >"$LOGD/db-sync-nova.log" 2>&1 &
  pids+=($!)
  (
    placement-manage --config-file "$ETC/placement/placement.conf" db sync &&
      glance-manage --config-file "$ETC/glance/glance-api.conf" db_sync &&
      octavia-db-manage --config-file "$ETC/octavia/octavia.conf" upgrade head
  ) >"$LOGD/db-sync-others.log" 2>&1 &
  pids+=($!)
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  [ $rc = 0 ] || die "a schema sync failed; see $LOGD/db-sync-*.log"
  touch "$STATE/.initialized"
  log "databases created"
}

wait_mysql() {
  local deadline=$((SECONDS + WAIT))
  until mysql_root -e 'select 1' >/dev/null 2>&1; do
    is_up mariadb || die "mariadb exited; see $LOGD/mariadb.log"
    [ $SECONDS -lt $deadline ] || die "mariadb does not answer after ${WAIT}s; see $LOGD/mariadb.log"
    sleep 0.2
  done
}

seed() { OS_CLIENT_CONFIG_FILE=$CLOUDS $PY "$HERE/seed.py" "$@"; }

cmd_start() {
  need_root start
  installed || die "the test bed is not installed; run: $0 install"
  lock
  local t0=$SECONDS name
  write_configs
  ensure_certs
  write_clouds
  if ! { [ -e "$STATE/.initialized" ] && [ -d "$STATE/mysql/mysql" ]; }; then init_databases; fi
  # Seeding runs again (idempotent) and the reset snapshot is retaken when
  # seed.py changed since the snapshot.
  local seed_version
  seed_version=$(sha256sum "$HERE/seed.py" | cut -d' ' -f1)
  [ "$(cat "$STATE/.seeded" 2>/dev/null)" = "$seed_version" ] || rm -f "$STATE/.seeded"
  for name in "${INFRA[@]}"; do
    [ "$name" = rabbitmq ] && wait_port epmd
    spawn_service "$name"
  done
  wait_mysql
  wait_port memcached
  spawn_service keystone
  if [ ! -e "$STATE/.seeded" ]; then
    # Service users must exist before nova-compute and the agents start.
    wait_api keystone
    seed identities || die "creating the identities failed"
  fi
  wait_port rabbitmq
  for name in "${OPENSTACK[@]}"; do spawn_service "$name"; done
  for name in keystone placement glance neutron-server nova-api octavia-api; do wait_api "$name"; done
  if [ ! -e "$STATE/.seeded" ]; then
    seed resources "$STATE/seed-image-id" || die "creating the image and flavor failed"
    discover_hosts
    seed ready "$WAIT" "$HOST" || die "nova-compute or the linuxbridge agent is not ready; see $LOGD/nova-compute.log and $LOGD/neutron-linuxbridge-agent.log"
    snapshot
    echo "$seed_version" >"$STATE/.seeded"
  else
    seed ready "$WAIT" "$HOST" || die "nova-compute or the linuxbridge agent is not ready; see $LOGD/nova-compute.log and $LOGD/neutron-linuxbridge-agent.log"
  fi
  log "ready in $((SECONDS - t0))s; clouds.yaml: $CLOUDS (clouds admin, vm-project, cluster-project, other-project); logs: $LOGD"
}

discover_hosts() {
  local deadline=$((SECONDS + WAIT)) n=$ETC/nova/nova.conf
  until nova-manage --config-file "$n" cell_v2 list_hosts 2>/dev/null | grep -q " $HOST "; do
    [ $SECONDS -lt $deadline ] || die "nova-compute never registered; see $LOGD/nova-compute.log"
    nova-manage --config-file "$n" cell_v2 discover_hosts >>"$LOGD/discover-hosts.log" 2>&1 || true
    sleep 1
  done
}

snapshot() {
  mariadb-dump --no-defaults -S "$RUN/mysqld.sock" -uroot --single-transaction --add-drop-database \
    --databases "${DATABASES[@]}" >"$STATE/snapshot.sql.tmp" || die "mariadb-dump failed"
  mv "$STATE/snapshot.sql.tmp" "$STATE/snapshot.sql"
}

# ---------------------------------------------------------------- other commands

lock() {
  mkdir -p "$STATE"
  exec 9>"$STATE/.lock"
  flock -w "$WAIT" 9 || die "another testbed.sh holds $STATE/.lock"
}

cmd_stop() {
  need_root stop
  lock
  local rev=() i
  for ((i = ${#OPENSTACK[@]} - 1; i >= 0; i--)); do rev+=("${OPENSTACK[i]}"); done
  stop_services "${rev[@]}"
  stop_services rabbitmq epmd memcached
  stop_services mariadb
  log "stopped"
}

cmd_status() {
  local name pid st rc=0 rss pss total=0 totalp=0 p k v _
  for name in "${ALL[@]}"; do
    if is_up "$name"; then
      read -r pid st <"$RUN/$name.pid"
      rss=0 pss=0
      for p in $(session_members "$pid" "$st"); do
        while read -r k v _; do
          case $k in Rss:) rss=$((rss + v)) ;; Pss:) pss=$((pss + v)) ;; esac
        done <"/proc/$p/smaps_rollup" 2>/dev/null || true
      done
      total=$((total + rss)) totalp=$((totalp + pss))
      printf '%-26s up    pid %-7s rss %5d MiB  pss %5d MiB  %s\n' "$name" "$pid" $((rss / 1024)) \
        $((pss / 1024)) "${PORT[$name]:+$IP:${PORT[$name]}}"
    else
      printf '%-26s down  log %s\n' "$name" "$LOGD/$name.log"
      rc=1
    fi
  done
  printf '%-26s             rss %5d MiB  pss %5d MiB\n' "in all" $((total / 1024)) $((totalp / 1024))
  [ ! -e "$CLOUDS" ] || echo "clouds.yaml: $CLOUDS"
  return $rc
}

cmd_reset() {
  need_root reset
  lock
  [ -s "$STATE/snapshot.sql" ] || die "nothing to reset to: run $0 start first"
  local t0=$SECONDS was_up=1
  if ! is_up mariadb; then
    was_up=0
    spawn_service mariadb
  fi
  wait_mysql
  # A service's pooled connection left inside a transaction holds a metadata
  # lock that DROP DATABASE waits for (by default for a year), and a request
  # of that service can then wait behind the DROP: end the services'
  # connections first (they reconnect), wait for locks briefly, and retry.
  local try
  for try in 1 2 3; do
    end_service_connections
    if { echo "SET SESSION lock_wait_timeout = 20;"; cat "$STATE/snapshot.sql"; } | mysql_root; then
      break
    fi
    [ "$try" -lt 3 ] || die "restoring $STATE/snapshot.sql failed 3 times; see SHOW PROCESSLIST and $LOGD/mariadb.log"
    log "restoring the snapshot waited too long for a lock; ending the services' connections and trying again"
  done
  # The snapshot's heartbeats are old: without this nova-compute looks down
  # (NoValidHost) and the agent dead (port binding fails) until they report.
  mysql_root -e "UPDATE nova.services SET updated_at = UTC_TIMESTAMP() WHERE deleted = 0;
    UPDATE neutron.agents SET heartbeat_timestamp = UTC_TIMESTAMP();"
  # Images uploaded after the snapshot.
  local keep
  keep=$(cat "$STATE/seed-image-id" 2>/dev/null || true)
  find "$STATE/glance/images" -mindepth 1 -maxdepth 1 ! -name "${keep:-none}" -delete
  if is_up memcached; then
    exec 3<>"/dev/tcp/$IP/11211"
    printf 'flush_all\r\n' >&3
    read -r -t 5 _ <&3 || true
    exec 3>&-
  fi
  if [ $was_up = 1 ]; then
    if is_up nova-compute && is_up keystone; then
      seed ready "$WAIT" "$HOST" || die "nova-compute or the linuxbridge agent is not ready after the reset"
    fi
  else
    stop_services mariadb
  fi
  log "databases reset to the first start's state in $((SECONDS - t0))s"
}

cmd_smoke() {
  [ -e "$CLOUDS" ] || die "no $CLOUDS: run $0 start first"
  OS_CLIENT_CONFIG_FILE=$CLOUDS $PY "$HERE/smoke.py"
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  reset) cmd_reset ;;
  smoke) cmd_smoke ;;
  clouds)
    write_clouds
    echo "$CLOUDS"
    ;;
  *)
    sed -n '2,/^set -euo/{/^#/p}' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
