// Package openstack is the extension's only door to OpenStack (gophercloud/v2).
// Each use has its own small interface (projects, network facts, shares, load
// balancers, security groups, port quota) so callers depend on what they use
// and nothing else. Every call has a timeout, only what is safe to retry is
// retried, and errors say which project, which object and what OpenStack
// answered. Credentials come from clouds.yaml Secrets, read as CAPO reads
// them, and are never logged.
package openstack
