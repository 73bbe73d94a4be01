{{/* The labels every object carries; $name is the component. */}}
{{- define "edgeota.labels" -}}
app.kubernetes.io/name: {{ . }}
app.kubernetes.io/part-of: edgeota
{{- end -}}

{{/* An image reference: repository:tag, @digest when set; the tag defaults to the chart's appVersion. */}}
{{- define "edgeota.image" -}}
{{- $image := index .root.Values.images .component -}}
{{- $image.repository }}:{{ $image.tag | default .root.Chart.AppVersion }}{{ with $image.digest }}@{{ . }}{{ end }}
{{- end -}}

{{/* The service account user of a component in the release's namespace. */}}
{{- define "edgeota.user" -}}
system:serviceaccount:{{ .root.Release.Namespace }}:{{ .account }}
{{- end -}}

{{/* Values that cannot work, refused before anything is installed, beyond
what values.schema.json refuses (agent.identity is node or serviceaccount:
auto is for ad-hoc runs only). */}}
{{- define "edgeota.validate" -}}
{{- $identity := .Values.agent.identity -}}
{{- if and (eq $identity "node") (semverCompare "<1.36.0-0" .Capabilities.KubeVersion.Version) -}}
{{- fail (printf "agent.identity: node needs Kubernetes 1.36 or later (constrained impersonation), and this cluster is %s: set agent.identity=serviceaccount" .Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- if and .Values.agent.clientCA (not .Values.agent.tlsSecret) -}}
{{- fail "agent.clientCA needs agent.tlsSecret: client certificates are verified over TLS" -}}
{{- end -}}
{{- end -}}
