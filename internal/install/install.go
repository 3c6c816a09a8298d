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

// Package install holds what config/ decides about where the extension runs,
// for the manager's defaults and for the harnesses that install it the same
// way (they need this fact, not the manager).
package install

// Namespace is where config/ installs the extension: the manager runs there
// and the VM projects' credential Secrets live there.
const Namespace = "capo-sharednet-system"

// AttachmentsPolicy names the ValidatingAdmissionPolicy, and its binding,
// that config/policy ships: only the extension writes SharedNetworkAttachments.
const AttachmentsPolicy = "capo-sharednet-attachments"
