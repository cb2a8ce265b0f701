#!/bin/sh
# Collect the reports the gpu-doctor Job or DaemonSet printed to its pods' logs, one file per node:
#   examples/kubernetes/collect.sh [DIR]      (default: reports)
#   gpu-doctor fleet DIR
# Exits 1 when a pod has no report yet (Pending, or still checking), after naming it.
#
# It is this one-liner (files named after the pods), plus naming each file after the pod's node:
#   mkdir -p reports && kubectl logs -l app=gpu-doctor --prefix --tail=-1 | awk '{ pod = $1; sub(/^\[pod\//, "", pod); sub(/\/.*/, "", pod); sub(/^[^ ]* /, ""); f = "reports/" pod ".json"; if (f != last) close(last); last = f; print > f }'
# --tail=-1 because with a selector kubectl shows only the last 10 lines of each log; --prefix
# starts each line with "[pod/NAME/CONTAINER] ". Without --follow kubectl reads the pods one after
# the other, so their lines do not interleave, and each file is closed when the next pod starts
# (awk would run out of open files on a large cluster).
set -eu
dir=${1:-reports}
mkdir -p "$dir"
nodes=$(mktemp)
trap 'rm -f "$nodes"' EXIT
kubectl get pods -l app=gpu-doctor -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}' >"$nodes"
kubectl logs -l app=gpu-doctor --prefix --tail=-1 | awk -v dir="$dir" '
  FILENAME == ARGV[1] { node[$1] = $2; pods[$2]++; next }
  {
    pod = $1; sub(/^\[pod\//, "", pod); sub(/\/.*/, "", pod); sub(/^[^ ]* /, "")
    name = (node[pod] != "" && pods[node[pod]] == 1) ? node[pod] : pod  # two pods on one node: by pod
    f = dir "/" name ".json"
    if (f != last) close(last)
    last = f
    print > f
  }' "$nodes" -
# A pod that is Pending or still checking has written nothing: name it rather than leave it out.
missing=0
while read -r pod node; do
  if [ ! -s "$dir/$node.json" ] && [ ! -s "$dir/$pod.json" ]; then
    echo "gpu-doctor: no report from pod $pod on node ${node:-(none: not scheduled)}; see kubectl describe pod $pod" >&2
    missing=1
  fi
done <"$nodes"
echo "gpu-doctor: $(find "$dir" -name '*.json' | wc -l) report(s) in $dir; now run: gpu-doctor fleet $dir" >&2
exit "$missing"
