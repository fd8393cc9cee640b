#!/usr/bin/env bash
# Renders rules.yml (beside this script) as a Prometheus Operator
# PrometheusRule, the file deploy/k8s/components/prometheus-operator/
# prometheusrule.yaml. rules.yml stays the one source: after editing it, run
#   deploy/prometheus/render-prometheusrule.sh --write
# tests/deploy (deploy_prometheusrule_in_sync) fails while the two differ.
# Without --write the rendering goes to stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/../k8s/components/prometheus-operator/prometheusrule.yaml

render() {
  cat <<'HEAD'
# GENERATED from deploy/prometheus/rules.yml by
# deploy/prometheus/render-prometheusrule.sh --write: edit rules.yml, not this.
# The Stagger recording and alerting rules for the Prometheus Operator.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: staggerd
  labels:
    app.kubernetes.io/name: staggerd
    app.kubernetes.io/component: coordinator
    app.kubernetes.io/part-of: stagger
spec:
HEAD
  # rules.yml's top level is `groups:`; under spec it is indented 2 spaces.
  # Its own header comment (up to the first non-comment line) is dropped.
  sed -n '/^[^#]/,$p' "$here/rules.yml" | sed 's/^\(.\)/  \1/'
}

case "${1:-}" in
  --write) render > "$out" ;;
  "") render ;;
  *) echo "usage: $0 [--write]" >&2; exit 2 ;;
esac
