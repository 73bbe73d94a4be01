#!/usr/bin/env bash
# Builds the local cluster's binaries into bin/ from the pinned tools module
# (hack/tools/go.mod): etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl (all Kubernetes ones with version ldflags, so that
# they report their real version), kwok, kwokctl and grpcurl; and Prometheus
# and promtool from their own (hack/prometheus/go.mod: their client-go and
# grpc differ from hack/tools'), with -tags remove_all_sd (no service
# discovery but static targets and files) and without builtinassets (no web
# UI, which needs npm-built files; the API and the rules work without it).
#
# A binary is rebuilt only when it is missing or its stamp (bin/.tools/NAME)
# does not match a hash of what it is built from: its tools module (go.mod,
# go.sum), its line below (package, flags, tags) and `go version`.
# Nothing is written outside the checkout except Go's module and build caches.
#
# Usage: hack/tools.sh [NAME...]   (no NAME: every tool)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$root/bin
stamps=$bin/.tools
go=${GO:-go}
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
export GOWORK=off

k8s_version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$root/hack/tools/go.mod")
minor=${k8s_version#v1.}
minor=${minor%%.*}
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
done
k8s_ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
grpcurl_version=$(awk '$1 == "github.com/fullstorydev/grpcurl" { print $2; exit }' "$root/hack/tools/go.mod")

# Prometheus's Go module v0.MNN.P is Prometheus M.NN.P (v0.316.0: 3.16.0),
# which its --version reports.
prom_module=$(awk '$1 == "github.com/prometheus/prometheus" { print $2; exit }' "$root/hack/prometheus/go.mod")
prom_minor=${prom_module#v0.}
prom_minor=${prom_minor%%.*}
prom_version=${prom_minor:0:1}.$((10#${prom_minor:1})).${prom_module##*.}
prom_ldflags="-s -w -X github.com/prometheus/common/version.Version=$prom_version -X github.com/prometheus/common/version.Revision=$prom_module"

# name|module directory|package|ldflags|build tags
tools=(
	"etcd|hack/tools|go.etcd.io/etcd/server/v3|-s -w|"
	"kube-apiserver|hack/tools|k8s.io/kubernetes/cmd/kube-apiserver|$k8s_ldflags|"
	"kube-controller-manager|hack/tools|k8s.io/kubernetes/cmd/kube-controller-manager|$k8s_ldflags|"
	"kube-scheduler|hack/tools|k8s.io/kubernetes/cmd/kube-scheduler|$k8s_ldflags|"
	"kubectl|hack/tools|k8s.io/kubernetes/cmd/kubectl|$k8s_ldflags|"
	"kwok|hack/tools|sigs.k8s.io/kwok/cmd/kwok|-s -w|"
	"kwokctl|hack/tools|sigs.k8s.io/kwok/cmd/kwokctl|-s -w|"
	"grpcurl|hack/tools|github.com/fullstorydev/grpcurl/cmd/grpcurl|-s -w -X main.version=$grpcurl_version|"
	"prometheus|hack/prometheus|github.com/prometheus/prometheus/cmd/prometheus|$prom_ldflags|remove_all_sd"
	"promtool|hack/prometheus|github.com/prometheus/prometheus/cmd/promtool|$prom_ldflags|remove_all_sd"
)

# The tools asked for, every one by default.
if (($# > 0)); then
	wanted=()
	for name in "$@"; do
		found=
		for entry in "${tools[@]}"; do
			[[ ${entry%%|*} == "$name" ]] && wanted+=("$entry") && found=1
		done
		[[ -n $found ]] || { echo "hack/tools.sh: no tool named $name" >&2; exit 2; }
	done
	tools=("${wanted[@]}")
fi

# stamp ENTRY MODULE_DIR: a hash of what the tool is built from.
stamp() {
	cat "$root/$2/go.mod" "$root/$2/go.sum" <(echo "$1") <($go version) | sha256sum | cut -d' ' -f1
}
mkdir -p "$bin" "$stamps"

total=${#tools[@]}
i=0
built=0
for entry in "${tools[@]}"; do
	IFS='|' read -r name module pkg ldflags tags <<<"$entry"
	i=$((i + 1))
	want=$(stamp "$entry" "$module")
	if [[ -x $bin/$name && -f $stamps/$name && $(<"$stamps/$name") == "$want" ]]; then
		echo "[$i/$total] $name: up to date"
		continue
	fi
	echo "[$i/$total] $name: building $pkg ..."
	start=$SECONDS
	rm -f "$stamps/$name"
	(cd "$root/$module" && $go build -tags "$tags" -ldflags "$ldflags" -o "$bin/$name" "$pkg")
	echo "$want" >"$stamps/$name"
	echo "[$i/$total] $name: built in $((SECONDS - start))s"
	built=$((built + 1))
done
echo "tools: $built built, $((total - built)) up to date, in bin/"
