/*
Copyright The capo-sharednet Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package openstack is the extension's only door to OpenStack (gophercloud/v2).
// Each use has its own small interface (projects, network facts, shares, load
// balancers, security groups, port quota) so callers depend on what they use
// and nothing else, and each lists only what the product calls: reads only
// tests need (is a load balancer gone yet) live in test/testbed. Every call
// has a timeout, only what is safe to retry is retried, and errors say which
// project, which object and what OpenStack answered. Credentials come from
// clouds.yaml Secrets, read as CAPO reads them, and are never logged.
package openstack
