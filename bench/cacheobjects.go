package main

import (
	"bytes"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"
	"k8s.io/utils/ptr"
)

// The objects the cache scenario decodes, as the API server sends a
// kubelet-run DaemonSet's pods and a kubelet's Node: every field a real one
// carries (managedFields of the DaemonSet controller and the kubelet, the
// service account volume, the tolerations the DaemonSet controller adds,
// five conditions, container statuses), so that decoding and trimming them
// costs what the controller pays per watch event.

// fleetStart is when the representative objects were created.
var fleetStart = time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)

// cacheDaemonSets are the DaemonSets the representative pods belong to: four
// per node, as in the at-rest scenario.
const cacheDaemonSets = 4

// representativePod is the i-th DaemonSet pod of a fleet of nodes: pod i runs
// on node i / cacheDaemonSets, of DaemonSet i % cacheDaemonSets.
func representativePod(i int) *corev1.Pod {
	ds := fmt.Sprintf("edge-agent-%d", i%cacheDaemonSets)
	node := fmt.Sprintf("edge-node-%d", i/cacheDaemonSets)
	created := metav1.NewTime(fleetStart.Add(time.Duration(i) * time.Second))
	started := metav1.NewTime(created.Add(3 * time.Second))
	const hash = "6d5f8b9c7b"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%05x", ds, i), GenerateName: ds + "-", Namespace: "edge-system",
			UID:             types.UID(fmt.Sprintf("3f6c2a1e-9b7d-4c5e-8a2f-%012x", i)),
			ResourceVersion: fmt.Sprint(4_000_000 + i), CreationTimestamp: created,
			Labels: map[string]string{"app.kubernetes.io/name": ds, "app.kubernetes.io/part-of": "edge-fleet",
				"controller-revision-hash": hash, "pod-template-generation": "3"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds,
				UID: types.UID(fmt.Sprintf("9a1b2c3d-4e5f-4a6b-8c7d-%012x", i%cacheDaemonSets)), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created,
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(controllerFields)},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &started,
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(kubeletFields), Subresource: "status"},
			},
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
						Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
						FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				},
				DefaultMode: ptr.To[int32](420),
			}}}},
			Containers: []corev1.Container{{
				Name: "agent", Image: "registry.example.com/edge/agent:1.19.4",
				Args:  []string{"--metrics-addr=:9100", "--log-level=info"},
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9100, Protocol: corev1.ProtocolTCP}},
				Env: []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}},
					{Name: "GOMEMLIMIT", Value: "60MiB"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
				VolumeMounts:             []corev1.VolumeMount{{Name: "kube-api-access-x7k2p", ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy:          corev1.PullIfNotPresent,
			}},
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			DNSPolicy:                     corev1.DNSClusterFirst,
			ServiceAccountName:            "default",
			DeprecatedServiceAccount:      "default",
			NodeName:                      node,
			SecurityContext:               &corev1.PodSecurityContext{},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
					{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}},
			SchedulerName: corev1.DefaultSchedulerName,
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			},
			Priority:           ptr.To[int32](0),
			EnableServiceLinks: ptr.To(true),
			PreemptionPolicy:   ptr.To(corev1.PreemptLowerPriority),
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: "PodReadyToStartContainers", Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: created},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created},
			},
			HostIP: "10.8.0.12", HostIPs: []corev1.HostIP{{IP: "10.8.0.12"}},
			PodIP: "10.244.3.17", PodIPs: []corev1.PodIP{{IP: "10.244.3.17"}},
			StartTime: &created,
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "agent", Ready: true, Started: ptr.To(true), RestartCount: 0,
				State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
				Image:       "registry.example.com/edge/agent:1.19.4",
				ImageID:     "registry.example.com/edge/agent@sha256:4b2e7c1d9a8f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d",
				ContainerID: fmt.Sprintf("containerd://%064x", i),
				VolumeMounts: []corev1.VolumeMountStatus{{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount",
					ReadOnly: true, RecursiveReadOnly: ptr.To(corev1.RecursiveReadOnlyDisabled)}},
			}},
			QOSClass: corev1.PodQOSBurstable,
		},
	}
}

// representativeNode is the i-th node of the fleet, as a kubelet reports it.
func representativeNode(i int) *corev1.Node {
	name := fmt.Sprintf("edge-node-%d", i)
	created := metav1.NewTime(fleetStart)
	beat := metav1.NewTime(fleetStart.Add(time.Hour))
	quantities := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8050516Ki"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("61255492Ki")}
	var images []corev1.ContainerImage
	for j := range 12 {
		images = append(images, corev1.ContainerImage{SizeBytes: int64(20_000_000 + j*1_000_000), Names: []string{
			fmt.Sprintf("registry.example.com/edge/app-%d@sha256:%064x", j, j), fmt.Sprintf("registry.example.com/edge/app-%d:1.%d.0", j, j)}})
	}
	condition := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, message string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, LastHeartbeatTime: beat, LastTransitionTime: created, Reason: reason, Message: message}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID(fmt.Sprintf("7c3e1a2b-5d4f-4e6a-9b8c-%012x", i)), ResourceVersion: fmt.Sprint(3_000_000 + i),
			CreationTimestamp: created,
			Labels: map[string]string{"beta.kubernetes.io/arch": "arm64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64",
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "node-role.kubernetes.io/edge": "",
				"node.kubernetes.io/instance-type": "gateway-4c8g", "topology.kubernetes.io/region": "eu-west", "topology.kubernetes.io/zone": fmt.Sprintf("site-%d", i%50)},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created,
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{".":{},"f:node.alpha.kubernetes.io/ttl":{},"f:volumes.kubernetes.io/controller-managed-attach-detach":{}},"f:labels":{".":{},"f:beta.kubernetes.io/arch":{},"f:beta.kubernetes.io/os":{},"f:kubernetes.io/arch":{},"f:kubernetes.io/hostname":{},"f:kubernetes.io/os":{}}}}`)},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &beat, Subresource: "status",
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:allocatable":{"f:ephemeral-storage":{}},"f:conditions":{"k:{\"type\":\"DiskPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"MemoryPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"PIDPressure\"}":{"f:lastHeartbeatTime":{}},"k:{\"type\":\"Ready\"}":{"f:lastHeartbeatTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{}}},"f:images":{},"f:nodeInfo":{"f:bootID":{},"f:kernelVersion":{},"f:osImage":{}}}}`)},
			},
		},
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.244.%d.0/24", i%256), PodCIDRs: []string{fmt.Sprintf("10.244.%d.0/24", i%256)}},
		Status: corev1.NodeStatus{
			Capacity: quantities, Allocatable: quantities,
			Conditions: []corev1.NodeCondition{
				condition(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				condition(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				condition(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				condition(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.8.0.12"}, {Type: corev1.NodeHostName, Address: name}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{MachineID: fmt.Sprintf("%032x", i), SystemUUID: fmt.Sprintf("%032x", i+1), BootID: fmt.Sprintf("%032x", i+2),
				KernelVersion: "6.1.0-28-arm64", OSImage: "Debian GNU/Linux 12 (bookworm)", ContainerRuntimeVersion: "containerd://1.7.24",
				KubeletVersion: "v1.36.3", OperatingSystem: "linux", Architecture: "arm64"},
			Images: images,
		},
	}
}

// What the DaemonSet controller and the kubelet own of a pod, as the API
// server sends it in managedFields.
const (
	controllerFields = `{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app.kubernetes.io/name":{},"f:app.kubernetes.io/part-of":{},"f:controller-revision-hash":{},"f:pod-template-generation":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"9a1b2c3d-4e5f-4a6b-8c7d-000000000000\"}":{}}},"f:spec":{"f:affinity":{".":{},"f:nodeAffinity":{".":{},"f:requiredDuringSchedulingIgnoredDuringExecution":{}}},"f:containers":{"k:{\"name\":\"agent\"}":{".":{},"f:args":{},"f:env":{".":{},"k:{\"name\":\"GOMEMLIMIT\"}":{".":{},"f:name":{},"f:value":{}},"k:{\"name\":\"NODE_NAME\"}":{".":{},"f:name":{},"f:valueFrom":{".":{},"f:fieldRef":{}}}},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":9100,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}}},"f:resources":{".":{},"f:limits":{".":{},"f:memory":{}},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{},"f:tolerations":{}}}`
	kubeletFields    = `{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"PodReadyToStartContainers\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:hostIPs":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.244.3.17\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`
)

// Media types the API server answers watches in.
const (
	mediaJSON     = runtime.ContentTypeJSON
	mediaProtobuf = runtime.ContentTypeProtobuf
)

// encodeEvents writes objs as the API server streams a watch in the media
// type: each object encoded as it is stored, wrapped in a WatchEvent
// (MODIFIED), framed.
func encodeEvents(mediaType string, objs []runtime.Object) ([]byte, error) {
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
	if !ok || info.StreamSerializer == nil {
		return nil, fmt.Errorf("no stream serializer for %s", mediaType)
	}
	var out bytes.Buffer
	frames := info.StreamSerializer.Framer.NewFrameWriter(&out)
	eventEncoder := streaming.NewEncoder(frames, info.StreamSerializer.Serializer)
	for _, obj := range objs {
		gvks, _, err := scheme.Scheme.ObjectKinds(obj)
		if err != nil {
			return nil, err
		}
		var raw bytes.Buffer
		if err := scheme.Codecs.EncoderForVersion(info.Serializer, gvks[0].GroupVersion()).Encode(obj, &raw); err != nil {
			return nil, err
		}
		if err := eventEncoder.Encode(&metav1.WatchEvent{Type: string(watch.Modified), Object: runtime.RawExtension{Raw: raw.Bytes()}}); err != nil {
			return nil, err
		}
	}
	return out.Bytes(), nil
}

// eventDecoder decodes a watch stream in the media type as client-go's
// typed clients do (rest.Request's stream watcher: the negotiated stream
// decoder, its framer, the embedded object decoder).
func eventDecoder(mediaType string, stream []byte) (*restclientwatch.Decoder, error) {
	negotiator := runtime.NewClientNegotiator(scheme.Codecs.WithoutConversion(), corev1.SchemeGroupVersion)
	objectDecoder, streamingSerializer, framer, err := negotiator.StreamDecoder(mediaType, nil)
	if err != nil {
		return nil, err
	}
	frames := framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream)))
	return restclientwatch.NewDecoder(streaming.NewDecoder(frames, streamingSerializer), objectDecoder), nil
}
