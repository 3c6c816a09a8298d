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

package nodeconfig

import (
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
)

// apply patches kct the way CAPI's topology controller applies an external
// patch, and reads the result back.
func apply(t *testing.T, kct string, a Additions) *bootstrapv1.KubeadmConfigTemplate {
	t.Helper()
	g := NewWithT(t)
	ops, err := Inject([]byte(kct), a)
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := json.Marshal(ops)
	g.Expect(err).NotTo(HaveOccurred())
	p, err := jsonpatch.DecodePatch(raw)
	g.Expect(err).NotTo(HaveOccurred())
	out, err := p.Apply([]byte(kct))
	g.Expect(err).NotTo(HaveOccurred(), "patch %s on %s", raw, kct)
	got := &bootstrapv1.KubeadmConfigTemplate{}
	g.Expect(json.Unmarshal(out, got)).To(Succeed())
	return got
}

const workerTemplate = `{"apiVersion":"bootstrap.cluster.x-k8s.io/v1beta2","kind":"KubeadmConfigTemplate",
"spec":{"template":{"spec":{"joinConfiguration":{"nodeRegistration":{"name":"{{ v1.local_hostname }}",
"kubeletExtraArgs":[{"name":"cloud-provider","value":"external"},{"name":"provider-id","value":"openstack:///{{ v1.instance_id }}"}]}}}}}}`

func TestTheNodegroupsBootstrapTemplateGainsTheLabelAndTheRouteScript(t *testing.T) {
	g := NewWithT(t)
	got := apply(t, workerTemplate, For("vm-net", "192.168.50.0/24"))
	spec := got.Spec.Template.Spec
	g.Expect(spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs).To(Equal([]bootstrapv1.Arg{
		{Name: "cloud-provider", Value: ptr.To("external")},
		{Name: "provider-id", Value: ptr.To("openstack:///{{ v1.instance_id }}")},
		{Name: "node-labels", Value: ptr.To("sharednet.capo.io/network=vm-net")},
	}), "the class's kubelet arguments are kept")
	g.Expect(spec.JoinConfiguration.NodeRegistration.Name).To(Equal("{{ v1.local_hostname }}"))
	g.Expect(spec.Files).To(HaveLen(1))
	g.Expect(spec.Files[0].Path).To(Equal(ScriptPath))
	g.Expect(spec.Files[0].Permissions).To(Equal("0755"))
	g.Expect(spec.Files[0].Content).To(HavePrefix("#!/usr/bin/python3"))
	g.Expect(spec.PreKubeadmCommands).To(Equal([]string{ScriptPath + " 192.168.50.0/24"}))
	g.Expect(Carried(got)).To(Equal(ptr.To(For("vm-net", "192.168.50.0/24"))), "the sticky rule reads back what was written")
}

func TestTheLabelJoinsTheClasssNodeLabels(t *testing.T) {
	for _, tc := range []struct{ name, labels, want string }{
		{"other labels kept", "tier=web,zone=a", "tier=web,zone=a,sharednet.capo.io/network=vm-net"},
		{"an older value of the label replaced", "sharednet.capo.io/network=old,tier=web", "tier=web,sharednet.capo.io/network=vm-net"},
		{"an empty value", "", "sharednet.capo.io/network=vm-net"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kct := `{"spec":{"template":{"spec":{"joinConfiguration":{"nodeRegistration":{"kubeletExtraArgs":[{"name":"node-labels","value":"` + tc.labels + `"},{"name":"v","value":"2"}]}}}}}}`
			got := apply(t, kct, For("vm-net", ""))
			NewWithT(t).Expect(got.Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs).To(Equal([]bootstrapv1.Arg{
				{Name: "node-labels", Value: ptr.To(tc.want)}, {Name: "v", Value: ptr.To("2")},
			}))
		})
	}
}

func TestWhatTheClassAlreadyListsIsKept(t *testing.T) {
	for _, kct := range []string{
		`{"spec":{"template":{"spec":{}}}}`,
		`{"spec":{"template":{}}}`,
		`{"spec":{}}`,
		`{"spec":{"template":{"spec":{"joinConfiguration":{}}}}}`,
		`{"spec":{"template":{"spec":{"joinConfiguration":{"nodeRegistration":{"kubeletExtraArgs":null}}}}}}`,
	} {
		got := apply(t, kct, For("vm-net", "10.0.0.0/24"))
		g := NewWithT(t)
		g.Expect(got.Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs).To(Equal([]bootstrapv1.Arg{
			{Name: "node-labels", Value: ptr.To("sharednet.capo.io/network=vm-net")}}), kct)
		g.Expect(got.Spec.Template.Spec.PreKubeadmCommands).To(Equal([]string{ScriptPath + " 10.0.0.0/24"}), kct)
	}
	got := apply(t, `{"spec":{"template":{"spec":{"files":[{"path":"/etc/a","content":"a"}],"preKubeadmCommands":["echo first"]}}}}`, For("vm-net", "10.0.0.0/24"))
	g := NewWithT(t)
	g.Expect(got.Spec.Template.Spec.Files).To(HaveLen(2))
	g.Expect(got.Spec.Template.Spec.Files[0].Path).To(Equal("/etc/a"))
	g.Expect(got.Spec.Template.Spec.PreKubeadmCommands).To(Equal([]string{"echo first", ScriptPath + " 10.0.0.0/24"}))
}

func TestWithoutTheSubnetsCIDROnlyTheLabel(t *testing.T) {
	g := NewWithT(t)
	got := apply(t, workerTemplate, For("vm-net", ""))
	g.Expect(got.Spec.Template.Spec.Files).To(BeEmpty())
	g.Expect(got.Spec.Template.Spec.PreKubeadmCommands).To(BeEmpty())
	g.Expect(Carried(got)).To(Equal(&Additions{Label: "vm-net"}))
	g.Expect(Carried(&bootstrapv1.KubeadmConfigTemplate{})).To(BeNil(), "a template of a nodegroup never attached carries nothing")
}

func TestTheLabelValueIsValidForEverySharedNetworkName(t *testing.T) {
	g := NewWithT(t)
	g.Expect(LabelValue("vm-net")).To(Equal("vm-net"))
	long := strings.Repeat("a", 60) + ".b." + strings.Repeat("c", 100)
	other := strings.Repeat("a", 60) + ".b." + strings.Repeat("d", 100)
	for _, name := range []string{long, other, strings.Repeat("x", 51) + "." + strings.Repeat("y", 20)} {
		g.Expect(validation.IsValidLabelValue(LabelValue(name))).To(BeEmpty(), name)
		g.Expect(LabelValue(name)).To(HavePrefix(name[:40]))
	}
	g.Expect(LabelValue(long)).NotTo(Equal(LabelValue(other)), "names alike in their first characters get different values")
	g.Expect(LabelValue(long)).To(Equal(LabelValue(long)))
}

func TestAnIgnitionTemplateGetsTheLabelOnly(t *testing.T) {
	g := NewWithT(t)
	got := apply(t, `{"spec":{"template":{"spec":{"format":"ignition","joinConfiguration":{}}}}}`, For("vm-net", "10.0.0.0/24"))
	g.Expect(got.Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs).To(Equal([]bootstrapv1.Arg{
		{Name: "node-labels", Value: ptr.To("sharednet.capo.io/network=vm-net")}}))
	g.Expect(got.Spec.Template.Spec.Files).To(BeEmpty(), "Ignition runs preKubeadmCommands under set -e, on images without python")
	g.Expect(got.Spec.Template.Spec.PreKubeadmCommands).To(BeEmpty())
}
