package controller

import (
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgeota/edgeota/imageref"
	"github.com/edgeota/edgeota/internal/unixtime"
)

// jobRecord is how the controller caches a pre-pull Job: what the handlers
// and judgePull read, built by the informer's transform (jobRecordOf).
type jobRecord struct {
	noMeta
	// Namespace, Name, UID and ResourceVersion identify the Job and the
	// state it was read in.
	Namespace, Name string
	UID             types.UID
	ResourceVersion string
	// Pods are the pods owning the Job (not as its controller): the pod
	// whose images it pulls.
	Pods []podRef
	// Revision is the revision hash it pulls (PrePullRevisionLabel); Node
	// the node it is pinned to.
	Revision, Node string
	// Created is its creation.
	Created unixtime.Time
	// Containers is how many containers its pod runs, one per image;
	// Active how many of its pods run.
	Containers, Active int32
	// ByTag names the containers whose image it names by tag, not by
	// digest: what their pull brought is what the tag named then.
	ByTag []string
	// FailedWhy is, for a Job whose Failed condition is True, its reason
	// and message ("reason: message").
	FailedWhy string
	// PrePull: it carries PrePullLabel=true. ByController: the controller
	// started it ahead of the node's turn (PrePullByLabel). Complete: its
	// Complete condition is True; Failed: its Failed one.
	PrePull, ByController, Complete, Failed bool
}

// podRef names a pod.
type podRef struct {
	Name string
	UID  types.UID
}

// jobRecordOf turns a Job into its record; a record (a transform applied
// twice) is returned as it is.
func jobRecordOf(obj any) any {
	switch o := obj.(type) {
	case *jobRecord:
		return o
	case *batchv1.Job:
		return newJobRecord(o)
	}
	return obj
}

func newJobRecord(job *batchv1.Job) *jobRecord {
	r := &jobRecord{Namespace: intern(job.Namespace), Name: job.Name, UID: job.UID, ResourceVersion: job.ResourceVersion,
		Revision: intern(job.Labels[PrePullRevisionLabel]), Node: intern(job.Spec.Template.Spec.NodeName),
		Created:    unixtime.Of(job.CreationTimestamp.Time),
		Containers: int32(len(job.Spec.Template.Spec.Containers)), Active: job.Status.Active,
		PrePull: job.Labels[PrePullLabel] == "true", ByController: job.Labels[PrePullByLabel] == prePullByController}
	for _, c := range job.Spec.Template.Spec.Containers {
		if !imageref.IsPinned(c.Image) {
			r.ByTag = append(r.ByTag, intern(c.Name))
		}
	}
	for i := range job.OwnerReferences {
		if ref := &job.OwnerReferences[i]; isKind(ref, podKind) {
			r.Pods = append(r.Pods, podRef{Name: ref.Name, UID: ref.UID})
		}
	}
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			r.Complete = true
		case batchv1.JobFailed:
			r.Failed, r.FailedWhy = true, c.Reason+": "+c.Message
		}
	}
	return r
}

// The metav1.Object methods the caches read.

func (j *jobRecord) GetNamespace() string             { return j.Namespace }
func (j *jobRecord) GetName() string                  { return j.Name }
func (j *jobRecord) GetUID() types.UID                { return j.UID }
func (j *jobRecord) GetResourceVersion() string       { return j.ResourceVersion }
func (j *jobRecord) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the record (runtime.Object).
func (j *jobRecord) DeepCopyObject() runtime.Object {
	c := *j
	c.Pods = slices.Clone(j.Pods)
	c.ByTag = slices.Clone(j.ByTag)
	return &c
}

var (
	_ metav1.Object  = (*jobRecord)(nil)
	_ runtime.Object = (*jobRecord)(nil)
)
