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

// Package nodeconfig is the bootstrap side of an attachment: what a
// nodegroup's KubeadmConfigTemplate gains with the shared port, in the same
// template rotation and so the same single rollout. Its Nodes carry a label
// naming the shared network (kubelet --node-labels), and a script run before
// kubeadm join keeps the node's default route off the shared subnet. Pure
// functions; the GeneratePatches hook decides whether to call them.
package nodeconfig

import (
	"crypto/sha256"
	_ "embed" // the route script
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"

	"github.com/capo-sharednet/capo-sharednet/internal/patches/sharedport"
)

const (
	// LabelKey is the label every Node of an attached nodegroup carries; its
	// value names the SharedNetwork (LabelValue).
	LabelKey = "sharednet.capo.io/network"
	// ScriptPath is where the route script is written on the node.
	ScriptPath = "/usr/local/sbin/capo-sharednet-routes"

	nodeLabelsArg = "node-labels"
	specPath      = "/spec/template/spec"
)

// routeScript is the script ScriptPath holds (capo-sharednet-routes).
//
//go:embed capo-sharednet-routes
var routeScript string

// Additions is what an attached nodegroup's bootstrap template carries.
type Additions struct {
	// Label is the value of LabelKey.
	Label string
	// Script is the content of ScriptPath; "" for none.
	Script string
	// Command runs it before kubeadm join; "" for none.
	Command string
}

// For is what this version adds for a nodegroup attached to sharedNetwork on
// a subnet of subnetCIDR ("" when not known: the label only).
func For(sharedNetwork, subnetCIDR string) Additions {
	a := Additions{Label: LabelValue(sharedNetwork)}
	if subnetCIDR != "" {
		a.Script, a.Command = routeScript, ScriptPath+" "+subnetCIDR
	}
	return a
}

// LabelValue is the SharedNetwork's name when it is a valid label value (63
// characters at most), else its first 52 characters and a hash of the whole
// name: SharedNetwork names may be up to 253 characters.
func LabelValue(sharedNetwork string) string {
	if len(validation.IsValidLabelValue(sharedNetwork)) == 0 {
		return sharedNetwork
	}
	sum := sha256.Sum256([]byte(sharedNetwork))
	return strings.TrimRight(sharedNetwork[:52], "-.") + "-" + hex.EncodeToString(sum[:])[:10]
}

// Inject returns the JSON patch adding a to a KubeadmConfigTemplate: the
// label merged into the join configuration's node-labels (other labels
// kept), the script appended to files and its command to
// preKubeadmCommands (cloud-config only: not for Ignition).
func Inject(kct []byte, a Additions) ([]sharedport.Operation, error) {
	var doc map[string]any
	if err := json.Unmarshal(kct, &doc); err != nil {
		return nil, fmt.Errorf("reading KubeadmConfigTemplate: %w", err)
	}
	t := &bootstrapv1.KubeadmConfigTemplate{}
	if err := json.Unmarshal(kct, t); err != nil {
		return nil, fmt.Errorf("reading KubeadmConfigTemplate: %w", err)
	}
	if t.Spec.Template.Spec.Format == bootstrapv1.Ignition {
		// Ignition runs preKubeadmCommands under set -e, and its images
		// (Flatcar) have no python: the script would stop the join.
		a.Script, a.Command = "", ""
	}
	label := LabelKey + "=" + a.Label
	args := t.Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs
	argsPath := []string{"joinConfiguration", "nodeRegistration", "kubeletExtraArgs"}
	var ops []sharedport.Operation
	if i := indexOfArg(args, nodeLabelsArg); i >= 0 {
		ops = append(ops, sharedport.Operation{Op: "replace", Path: fmt.Sprintf("%s/joinConfiguration/nodeRegistration/kubeletExtraArgs/%d/value", specPath, i),
			Value: withLabel(args[i].Value, label)})
	} else {
		ops = append(ops, appendTo(doc, argsPath, bootstrapv1.Arg{Name: nodeLabelsArg, Value: &label}))
	}
	if a.Script != "" {
		ops = append(ops, appendTo(doc, []string{"files"}, bootstrapv1.File{Path: ScriptPath, Owner: "root:root", Permissions: "0755", Content: a.Script}))
	}
	if a.Command != "" {
		ops = append(ops, appendTo(doc, []string{"preKubeadmCommands"}, a.Command))
	}
	return ops, nil
}

// Carried returns what a KubeadmConfigTemplate already carries, or nil.
func Carried(t *bootstrapv1.KubeadmConfigTemplate) *Additions {
	spec := t.Spec.Template.Spec
	a := Additions{}
	if i := indexOfArg(spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs, nodeLabelsArg); i >= 0 {
		for _, l := range strings.Split(valueOf(spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs[i]), ",") {
			if k, v, ok := strings.Cut(l, "="); ok && k == LabelKey {
				a.Label = v
			}
		}
	}
	for _, f := range spec.Files {
		if f.Path == ScriptPath {
			a.Script = f.Content
		}
	}
	for _, c := range spec.PreKubeadmCommands {
		if strings.HasPrefix(c, ScriptPath+" ") {
			a.Command = c
		}
	}
	if a == (Additions{}) {
		return nil
	}
	return &a
}

func indexOfArg(args []bootstrapv1.Arg, name string) int {
	for i := range args {
		if args[i].Name == name {
			return i
		}
	}
	return -1
}

func valueOf(a bootstrapv1.Arg) string {
	if a.Value == nil {
		return ""
	}
	return *a.Value
}

// withLabel adds label to a node-labels value, replacing a label of the same
// key.
func withLabel(value *string, label string) string {
	var out []string
	if value != nil && *value != "" {
		for _, l := range strings.Split(*value, ",") {
			if k, _, _ := strings.Cut(l, "="); k != LabelKey {
				out = append(out, l)
			}
		}
	}
	return strings.Join(append(out, label), ",")
}

// appendTo appends item to the list at path under spec.template.spec,
// creating the list and any missing parent (an "add" on an existing member
// would replace it), and records the change in doc for the next operation.
func appendTo(doc map[string]any, path []string, item any) sharedport.Operation {
	full := append([]string{"spec", "template", "spec"}, path...)
	node, at := doc, ""
	for i, key := range full {
		child, ok := node[key].(map[string]any)
		if i == len(full)-1 {
			if list, ok := node[key].([]any); ok {
				node[key] = append(list, item)
				return sharedport.Operation{Op: "add", Path: at + "/" + key + "/-", Value: item}
			}
		}
		if !ok {
			nested := func() any { // one for the operation, one for doc
				var value any = []any{item}
				for j := len(full) - 1; j > i; j-- {
					value = map[string]any{full[j]: value}
				}
				return value
			}
			node[key] = nested()
			return sharedport.Operation{Op: "add", Path: at + "/" + key, Value: nested()}
		}
		node, at = child, at+"/"+key
	}
	panic("unreachable: the last key returns")
}
