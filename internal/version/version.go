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

// Package version is the manager's version, set at build time with
// -ldflags "-X github.com/capo-sharednet/capo-sharednet/internal/version.Version=<version>"
// (make build, the Dockerfile). It is what --version prints and what the
// extension tells OpenStack and the API server it is.
package version

// Version is the release the manager was built as; "dev" for a plain go build.
var Version = "dev"

// UserAgent names the extension and its version in HTTP requests.
func UserAgent() string {
	return "capo-sharednet/" + Version
}
