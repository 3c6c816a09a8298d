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
*/package controllers

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharednetv1 "github.com/capo-sharednet/capo-sharednet/api/v1alpha1"

	"github.com/capo-sharednet/capo-sharednet/internal/preflight"
	"github.com/capo-sharednet/capo-sharednet/internal/rules"
)

// TestAFirstAttachJudgesOnceAndValidatesOneToken: the reconcile that
// shares a nodegroup for the first time gathers its facts once, runs the
// rules once (the check before the share; CloudFits reuses it) and has the
// VM project's Keystone validate the cluster's token once (the share uses
// the project the check verified).
func TestAFirstAttachJudgesOnceAndValidatesOneToken(t *testing.T) {
	g := NewWithT(t)
	s := newAuthorityStory(t, true, nil)
	evaluations := 0
	s.r.Checker = &preflight.Checker{Reader: s.client, Cloud: s.clouds, Rules: func(f rules.Facts) []*rules.Violation {
		evaluations++
		return rules.Evaluate(f)
	}}
	s.reconcile()
	a := s.attachment("md-a")
	g.Expect(a.Status.Share).NotTo(BeNil(), "shared in this reconcile")
	g.Expect(s.cloud.Calls["Share"]).To(Equal(1))
	g.Expect(s.cloud.Calls["ProjectOfToken"]).To(Equal(1), "one token validation of the cluster's credential")
	g.Expect(evaluations).To(Equal(1), "one evaluation of the rules")
	g.Expect(condition(a, sharednetv1.CloudFitsCondition).Status).To(Equal(metav1.ConditionTrue), "CloudFits from the same judgement")
}
