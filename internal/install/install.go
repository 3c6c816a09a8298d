// Package install holds what config/ decides about where the extension runs,
// for the manager's defaults and for the harnesses that install it the same
// way (they need this fact, not the manager).
package install

// Namespace is where config/ installs the extension: the manager runs there
// and the VM projects' credential Secrets live there.
const Namespace = "capo-sharednet-system"
