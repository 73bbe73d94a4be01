package main

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestRepresentativeObjectsRoundTripAsWatchEvents: the cache scenario's
// pods and nodes come out of a watch stream, in JSON as in protobuf, as
// they went in: the scenario decodes what the API server would send.
func TestRepresentativeObjectsRoundTripAsWatchEvents(t *testing.T) {
	objs := []runtime.Object{representativePod(0), representativePod(5), representativeNode(1)}
	for _, mediaType := range []string{mediaJSON, mediaProtobuf} {
		stream, err := encodeEvents(mediaType, objs)
		if err != nil {
			t.Fatalf("%s: encoding: %v", mediaType, err)
		}
		dec, err := eventDecoder(mediaType, stream)
		if err != nil {
			t.Fatalf("%s: %v", mediaType, err)
		}
		for i, want := range objs {
			_, got, err := dec.Decode()
			if err != nil {
				t.Fatalf("%s: decoding event %d: %v", mediaType, i, err)
			}
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("%s: got event %d decoded as %+v, want %+v", mediaType, i, got, want)
			}
		}
	}
}

// TestRepresentativePodsSpreadOverNodesAndDaemonSets: pod i runs on node
// i/4, of DaemonSet i%4, under a name and UID of its own.
func TestRepresentativePodsSpreadOverNodesAndDaemonSets(t *testing.T) {
	a, b, c := representativePod(0), representativePod(1), representativePod(cacheDaemonSets)
	if a.Spec.NodeName != b.Spec.NodeName || a.Spec.NodeName == c.Spec.NodeName {
		t.Errorf("got nodes %s, %s, %s; want the first two on one node, the third on the next", a.Spec.NodeName, b.Spec.NodeName, c.Spec.NodeName)
	}
	if a.OwnerReferences[0].UID == b.OwnerReferences[0].UID || a.OwnerReferences[0].UID != c.OwnerReferences[0].UID {
		t.Errorf("got owners %s, %s, %s; want pods 0 and 4 of one DaemonSet, pod 1 of another", a.OwnerReferences[0].UID, b.OwnerReferences[0].UID, c.OwnerReferences[0].UID)
	}
	if a.Name == c.Name || a.UID == c.UID {
		t.Errorf("got pods 0 and 4 named %s and %s, UIDs %s and %s; want their own", a.Name, c.Name, a.UID, c.UID)
	}
}

// BenchmarkDecodePodEvent decodes a representative DaemonSet pod's watch
// event as the controller's informers do, in each media type the API server
// answers in: `go test -run '^$' -bench DecodePodEvent ./bench/`.
func BenchmarkDecodePodEvent(b *testing.B) {
	const events = 1000
	objs := objects(events, representativePod)
	for _, mediaType := range []string{mediaJSON, mediaProtobuf} {
		b.Run(mediaType, func(b *testing.B) {
			stream, err := encodeEvents(mediaType, objs)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(stream) / events))
			dec, _ := eventDecoder(mediaType, stream)
			left := events
			for b.Loop() {
				if left == 0 {
					b.StopTimer()
					dec, _ = eventDecoder(mediaType, stream)
					left = events
					b.StartTimer()
				}
				if _, _, err := dec.Decode(); err != nil {
					b.Fatal(err)
				}
				left--
			}
		})
	}
}
