#!/usr/bin/env bash
# Builds the local cluster's binaries into bin/ from the pinned tools module
# (hack/tools/go.mod): etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl (all Kubernetes ones with version ldflags, so that
# they report their real version), kwok, kwokctl and grpcurl.
#
# A binary is rebuilt only when it is missing or its stamp (bin/.tools/NAME)
# does not match a hash of the tools module, this script and `go version`.
# Nothing is written outside the checkout except Go's module and build caches.
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

# name|package|ldflags
tools=(
	"etcd|go.etcd.io/etcd/server/v3|-s -w"
	"kube-apiserver|k8s.io/kubernetes/cmd/kube-apiserver|$k8s_ldflags"
	"kube-controller-manager|k8s.io/kubernetes/cmd/kube-controller-manager|$k8s_ldflags"
	"kube-scheduler|k8s.io/kubernetes/cmd/kube-scheduler|$k8s_ldflags"
	"kubectl|k8s.io/kubernetes/cmd/kubectl|$k8s_ldflags"
	"kwok|sigs.k8s.io/kwok/cmd/kwok|-s -w"
	"kwokctl|sigs.k8s.io/kwok/cmd/kwokctl|-s -w"
	"grpcurl|github.com/fullstorydev/grpcurl/cmd/grpcurl|-s -w -X main.version=$grpcurl_version"
)

stamp=$(cat "$root/hack/tools/go.mod" "$root/hack/tools/go.sum" "${BASH_SOURCE[0]}" <($go version) | sha256sum | cut -d' ' -f1)
mkdir -p "$bin" "$stamps"

total=${#tools[@]}
i=0
built=0
for entry in "${tools[@]}"; do
	IFS='|' read -r name pkg ldflags <<<"$entry"
	i=$((i + 1))
	if [[ -x $bin/$name && -f $stamps/$name && $(<"$stamps/$name") == "$stamp" ]]; then
		echo "[$i/$total] $name: up to date"
		continue
	fi
	echo "[$i/$total] $name: building $pkg ..."
	start=$SECONDS
	rm -f "$stamps/$name"
	(cd "$root/hack/tools" && $go build -ldflags "$ldflags" -o "$bin/$name" "$pkg")
	echo "$stamp" >"$stamps/$name"
	echo "[$i/$total] $name: built in $((SECONDS - start))s"
	built=$((built + 1))
done
echo "tools: $built built, $((total - built)) up to date, in bin/"
