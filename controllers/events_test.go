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

package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"
	"github.com/capo-sharednet/capo-sharednet/internal/install"
	"github.com/capo-sharednet/capo-sharednet/internal/scheme"
	"github.com/capo-sharednet/capo-sharednet/test/fakecloud"
)

// event is one Event as the API server would store it: the object it is
// about (kind, namespace, name), its type, reason and message. client-go's
// FakeRecorder drops the object's name, which these tests are about.
type event struct {
	Kind, Namespace, Name, Type, Reason, Message string
}

// eventLog is a record.EventRecorder that keeps every Event.
type eventLog struct {
	t      *testing.T
	mu     sync.Mutex
	events []event
}

var _ record.EventRecorder = &eventLog{}

func (l *eventLog) Event(obj runtime.Object, eventType, reason, message string) {
	if ref, ok := obj.(*corev1.ObjectReference); ok {
		// As client-go's recorder: the Event is about the referenced object,
		// in the reference's namespace.
		l.mu.Lock()
		defer l.mu.Unlock()
		l.events = append(l.events, event{Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name, Type: eventType, Reason: reason, Message: message})
		return
	}
	gvk, err := apiutil.GVKForObject(obj, scheme.New())
	if err != nil {
		l.t.Errorf("an Event about an object of no known kind (%T): %v", obj, err)
	}
	o, _ := obj.(client.Object)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, event{Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName(), Type: eventType, Reason: reason, Message: message})
}

func (l *eventLog) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	l.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

func (l *eventLog) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventType, reason, format string, args ...any) {
	l.Eventf(obj, eventType, reason, format, args...)
}

// take returns the Events recorded since the last take.
func (l *eventLog) take() []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

// about matches an Event on an object with a type and reason.
func about(kind, namespace, name, eventType, reason string) types.GomegaMatcher {
	return And(HaveField("Kind", kind), HaveField("Namespace", namespace), HaveField("Name", name),
		HaveField("Type", eventType), HaveField("Reason", reason))
}

// vmProjectInternals are what a cluster owner must never read: the VM
// project's ID, its Keystone and the Secret of its credential.
var vmProjectInternals = []string{"vm-project", fakecloud.DefaultKeystone, "vm-creds"}

// expectTenantSafe checks every Event in a tenant's namespace: on the
// Cluster it names the nodegroup, and none carries VM-project internals.
func expectTenantSafe(g Gomega, events []event) {
	for _, e := range events {
		if e.Namespace == install.Namespace {
			g.Expect(e.Kind).To(Equal("SharedNetwork"), "the administrator's Events, in the extension's namespace")
			continue
		}
		g.Expect(e.Namespace).NotTo(BeEmpty(), "no Event in default, which tenants may read")
		g.Expect(e.Kind).To(BeElementOf("Cluster", "SharedNetworkAttachment"), "Events in a tenant's namespace are on its own objects")
		if e.Kind == "Cluster" {
			g.Expect(e.Message).To(HavePrefix("nodegroup md-a: "), "an Event on the Cluster names the nodegroup")
		}
		for _, internal := range vmProjectInternals {
			g.Expect(e.Message).NotTo(ContainSubstring(internal), "%s %s/%s %s: no VM-project internals in a tenant's namespace", e.Kind, e.Namespace, e.Name, e.Reason)
		}
	}
}

// TestTheAttachmentControllerTellsTheClusterOwnerEachStep: the steps of an
// attach are Events on the Cluster (naming the nodegroup) and on its
// attachment, Normal while all goes well, each once; a revoked grant is a
// Warning.
func TestTheAttachmentControllerTellsTheClusterOwnerEachStep(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, true, nil)
	log := &eventLog{t: t}
	s.r.Recorder = log
	s.reconcile()
	events := log.take()
	attachment := sharednetv1.AttachmentName("demo", "md-a")
	g.Expect(events).To(ContainElements(
		about("Cluster", "team-a", "demo", corev1.EventTypeNormal, sharednetv1.EventAttaching),
		about("Cluster", "team-a", "demo", corev1.EventTypeNormal, sharednetv1.ReasonGranted),
		about("SharedNetworkAttachment", "team-a", attachment, corev1.EventTypeNormal, sharednetv1.ReasonGranted),
		about("Cluster", "team-a", "demo", corev1.EventTypeNormal, sharednetv1.ReasonShared),
		about("SharedNetworkAttachment", "team-a", attachment, corev1.EventTypeNormal, sharednetv1.ReasonShared),
	))
	g.Expect(events).To(ContainElement(And(HaveField("Reason", sharednetv1.EventAttaching),
		HaveField("Message", "nodegroup md-a: attaching to SharedNetwork vm, subnet "+s.subnet))))
	g.Expect(events).NotTo(ContainElement(HaveField("Type", corev1.EventTypeWarning)), "nothing went wrong")
	expectTenantSafe(g, events)

	s.reconcile()
	g.Expect(log.take()).To(BeEmpty(), "an Event says what changed, not what still holds")

	// The administrator revokes the grant: a Warning, the nodes keep their port.
	ns := &corev1.Namespace{}
	g.Expect(s.client.Get(context.Background(), client.ObjectKey{Name: "team-a"}, ns)).To(Succeed())
	s.update(ns, func() { ns.Labels = nil })
	s.reconcile()
	events = log.take()
	g.Expect(events).To(ContainElements(
		about("Cluster", "team-a", "demo", corev1.EventTypeWarning, sharednetv1.ReasonGrantRevoked),
		about("SharedNetworkAttachment", "team-a", attachment, corev1.EventTypeWarning, sharednetv1.ReasonGrantRevoked),
	))
	expectTenantSafe(g, events)
}

// TestANamespaceNotGrantedIsToldSo: a Warning on the Cluster (there is no
// attachment); nothing for the administrator (nothing was asked of the VM
// project).
func TestANamespaceNotGrantedIsToldSo(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, false, nil)
	log := &eventLog{t: t}
	s.r.Recorder = log
	s.reconcile()
	events := log.take()
	g.Expect(events).To(ContainElements(
		about("Cluster", "team-a", "demo", corev1.EventTypeWarning, sharednetv1.ReasonNotGranted),
	))
	g.Expect(events).NotTo(ContainElement(HaveField("Kind", "SharedNetwork")))
	g.Expect(events).NotTo(ContainElement(HaveField("Kind", "SharedNetworkAttachment")))
	expectTenantSafe(g, events)
}

// TestAVMProjectFailureIsTheAdministratorsEvent: the VM project's error
// goes to the SharedNetwork (cluster-scoped, the administrator's); the
// Cluster and the attachment are told it failed and where the administrator
// sees why, without the VM project's ID, Keystone or Secret.
func TestAVMProjectFailureIsTheAdministratorsEvent(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, true, nil)
	log := &eventLog{t: t}
	s.r.Recorder = log
	vmError := fmt.Errorf("POST %s/v2.0/rbac-policies for project vm-project (Secret vm-creds): 500 Internal Server Error", fakecloud.DefaultKeystone)
	s.cloud.Fail = func(method string) error {
		if method == "Share" {
			return vmError
		}
		return nil
	}
	s.reconcile()
	events := log.take()
	g.Expect(events).To(ContainElement(And(about("SharedNetwork", install.Namespace, "vm", corev1.EventTypeWarning, sharednetv1.EventVMProjectFailed),
		HaveField("Message", ContainSubstring(vmError.Error())))), "the administrator sees the VM project's error")
	tenant := And(HaveField("Type", corev1.EventTypeWarning), HaveField("Reason", sharednetv1.ReasonShareFailed),
		HaveField("Message", ContainSubstring("the Events of SharedNetwork vm (kubectl get events -n capo-sharednet-system --field-selector involvedObject.name=vm)")))
	g.Expect(events).To(ContainElements(
		And(about("Cluster", "team-a", "demo", corev1.EventTypeWarning, sharednetv1.ReasonShareFailed), tenant),
		And(about("SharedNetworkAttachment", "team-a", sharednetv1.AttachmentName("demo", "md-a"), corev1.EventTypeWarning, sharednetv1.ReasonShareFailed), tenant),
	))
	expectTenantSafe(g, events)
}

// TestTheSharedNetworkControllerRecordsEachChangeOfReady: an Event on the
// SharedNetwork when Ready changes (Normal when True, Warning when False),
// none while it holds.
func TestTheSharedNetworkControllerRecordsEachChangeOfReady(t *testing.T) {
	g := NewWithT(t)
	s := newNetworkStory(t)
	log := &eventLog{t: t}
	s.r.Recorder = log
	s.reconcile()
	g.Expect(log.take()).To(ConsistOf(And(about("SharedNetwork", install.Namespace, "vm", corev1.EventTypeNormal, sharednetv1.ReasonFactsCurrent),
		HaveField("Message", ContainSubstring("read from Neutron")))))

	s.now = s.now.Add(DefaultResync + time.Second)
	s.reconcile()
	g.Expect(log.take()).To(BeEmpty(), "Ready still True for the same reason")

	s.now = s.now.Add(DefaultResync + time.Second)
	s.cloud.Fail = func(method string) error {
		if method == "Subnets" {
			return errors.New("Neutron answered 503")
		}
		return nil
	}
	s.reconcile()
	g.Expect(log.take()).To(ConsistOf(And(about("SharedNetwork", install.Namespace, "vm", corev1.EventTypeWarning, sharednetv1.ReasonOpenStackUnavailable),
		HaveField("Message", ContainSubstring("503")))))

	s.now = s.now.Add(DefaultResync + time.Second)
	s.cloud.Fail = nil
	s.reconcile()
	g.Expect(log.take()).To(ConsistOf(about("SharedNetwork", install.Namespace, "vm", corev1.EventTypeNormal, sharednetv1.ReasonFactsCurrent)))
}
