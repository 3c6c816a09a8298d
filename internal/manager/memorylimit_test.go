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

package manager

import "testing"

// The Go runtime's soft limit leaves the binary's pages room under the
// container's limit, and a small container half of it.
func TestTheGoMemoryLimitLeavesRoomForWhatGoDoesNotCount(t *testing.T) {
	const mib = 1 << 20
	for limit, want := range map[uint64]uint64{
		384 * mib:  320 * mib, // the budget of 2,000 Clusters x 4 nodegroups
		256 * mib:  192 * mib,
		2048 * mib: 1984 * mib,
		100 * mib:  50 * mib,
		0:          0,
	} {
		if got := GoMemoryLimit(limit); got != want {
			t.Errorf("GoMemoryLimit(%d MiB) = %d MiB, want %d MiB", limit/mib, got/mib, want/mib)
		}
	}
}
