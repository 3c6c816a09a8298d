"""Octavia network driver for the capo-sharednet test bed.

Everything is the no-op driver (no amphora VMs exist), except the VIP: it is a
real Neutron port, allocated and freed by Octavia's allowed-address-pairs
driver, so a load balancer holds a port on its subnet exactly as in
production (it blocks an RBAC unshare with 409, a cascade delete frees it).

Registered as the `octavia.network.drivers` entry point `testbed_vip_driver`
by `testbed.sh install`.
"""

from octavia.network.drivers.neutron import allowed_address_pairs
from octavia.network.drivers.noop_driver import driver as noop


class VIPOnlyNetworkDriver(noop.NoopNetworkDriver):
    def __init__(self):
        super().__init__()
        self._aap = allowed_address_pairs.AllowedAddressPairsDriver()

    def allocate_vip(self, loadbalancer):
        return self._aap.allocate_vip(loadbalancer)

    def deallocate_vip(self, vip):
        return self._aap.deallocate_vip(vip)

    def get_port(self, port_id, context=None):
        return self._aap.get_port(port_id, context=context)
