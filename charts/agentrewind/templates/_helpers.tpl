{{/* The chart's name, nameOverride if set. */}}
{{- define "agentrewind.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name: fullnameOverride, else the release name when it already holds the
chart's name (release "agentrewind" gives agentrewind-manager, the names config/default uses), else
<release>-<chart>.
*/}}
{{- /* At most 55 characters: the metrics Service, <fullname>-metrics, is a DNS label of at most 63. */}}
{{- define "agentrewind.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 55 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 55 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 55 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The manager's Deployment, ClusterRole and bindings. */}}
{{- define "agentrewind.managerName" -}}
{{- printf "%s-manager" (include "agentrewind.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The ServiceAccount the manager runs as. */}}
{{- define "agentrewind.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "agentrewind.managerName" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the manager's own store credentials. */}}
{{- define "agentrewind.storeSecretName" -}}
{{- default (printf "%s-store" (include "agentrewind.managerName" .)) .Values.store.credentialsSecret.name }}
{{- end }}

{{- define "agentrewind.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "agentrewind.labels" -}}
helm.sh/chart: {{ include "agentrewind.chart" . }}
{{ include "agentrewind.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: agentrewind
{{- end }}

{{/* Labels that select the release's objects. */}}
{{- define "agentrewind.selectorLabels" -}}
app.kubernetes.io/name: {{ include "agentrewind.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels that select the manager's pods. */}}
{{- define "agentrewind.managerSelectorLabels" -}}
{{ include "agentrewind.selectorLabels" . }}
app.kubernetes.io/component: manager
{{- end }}

{{/* The manager's image: image.repository:image.tag (appVersion when empty), or @image.digest. */}}
{{- define "agentrewind.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The image engine Jobs and the rewind proxy run: engine.image, else the manager's own. */}}
{{- define "agentrewind.engineImage" -}}
{{- default (include "agentrewind.image" .) .Values.engine.image }}
{{- end }}

{{/*
Values that pass the schema but contradict each other or the chart: fail with what to set instead.
*/}}
{{- define "agentrewind.validate" -}}
{{- $v := .Values }}
{{- $ctx := . }}
{{- /*
Turning crds.install off on an upgrade makes Helm delete the CRDs this release installed, unless they
carry helm.sh/resource-policy: keep, and with them every AgentSession, ForkRun, ResumePlan and
Checkpoint of the cluster. lookup sees the cluster on install and upgrade (not in helm template).
*/}}
{{- /*
Two managers watching one namespace would both reconcile its sessions. A release cannot be renamed: a new
name is a second release beside the first. lookup sees the other managers on install and upgrade; one
scaled to zero reconciles nothing and is let be (a migration scales the old manager down first).
*/}}
{{- range (lookup "apps/v1" "Deployment" "" "").items | default list }}
{{- $labels := dig "metadata" "labels" dict . }}
{{- $ann := dig "metadata" "annotations" dict . }}
{{- $other := printf "%s/%s" .metadata.namespace .metadata.name }}
{{- if and (eq (get $labels "app.kubernetes.io/part-of") "agentrewind") (eq (get $labels "app.kubernetes.io/component") "manager") (ne (int (dig "spec" "replicas" 1 .)) 0) (not (and (eq (get $ann "meta.helm.sh/release-name") $ctx.Release.Name) (eq (get $ann "meta.helm.sh/release-namespace") $ctx.Release.Namespace))) }}
{{- $theirs := list }}
{{- range .spec.template.spec.containers }}
{{- range (.args | default list) }}
{{- if hasPrefix "--watch-namespaces=" (toString .) }}
{{- $theirs = splitList "," (trimPrefix "--watch-namespaces=" (toString .)) | compact }}
{{- end }}
{{- end }}
{{- end }}
{{- $overlap := or (empty $v.watchNamespaces) (empty $theirs) }}
{{- range $v.watchNamespaces }}
{{- if has . $theirs }}
{{- $overlap = true }}
{{- end }}
{{- end }}
{{- if $overlap }}
{{- fail (printf "another agentrewind manager, %s (release %s), already watches %s: two managers would reconcile the same sessions. Set watchNamespaces to namespaces it does not watch, scale it to zero, or uninstall it first (to rename a release, uninstall the old one, whose CRDs are kept, then install the new one with the same values)" $other (get $ann "meta.helm.sh/release-name" | default "not Helm's") (ternary "every namespace" (join ", " $theirs) (empty $theirs))) }}
{{- end }}
{{- end }}
{{- end }}
{{- if not $v.crds.install }}
{{- range list "agentsessions" "forkruns" "resumeplans" "checkpoints" "storagebudgets" }}
{{- $crd := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" (printf "%s.agentrewind.io" .) }}
{{- $ann := dig "metadata" "annotations" dict ($crd | default dict) }}
{{- if and (eq (get $ann "meta.helm.sh/release-name") $ctx.Release.Name) (eq (get $ann "meta.helm.sh/release-namespace") $ctx.Release.Namespace) (ne (get $ann "helm.sh/resource-policy") "keep") }}
{{- fail (printf "crds.install=false would make Helm delete the CRD %s.agentrewind.io this release installed, and with it every object of that kind in the cluster: upgrade with crds.install=true and crds.keep=true first, then turn crds.install off" .) }}
{{- end }}
{{- end }}
{{- end }}
{{- if not $v.store.jobCredentials.secretName }}
{{- fail "store.jobCredentials.secretName is required: the name of the Secret, in each session's namespace, holding its engine Jobs' store credentials (default agentrewind-store)" }}
{{- end }}
{{- with $v.watchNamespaces }}
{{- range $v.gc.namespaces }}
{{- if not (has . $v.watchNamespaces) }}
{{- fail (printf "gc.namespaces: %s is not among watchNamespaces (%s): the manager would never see its sessions; add it to watchNamespaces or leave it out" . (join ", " $v.watchNamespaces)) }}
{{- end }}
{{- end }}
{{- if and $v.store.sync.namespace (not (has $v.store.sync.namespace $v.watchNamespaces)) }}
{{- fail (printf "store.sync.namespace: %s is not among watchNamespaces (%s): add it to watchNamespaces" $v.store.sync.namespace (join ", " $v.watchNamespaces)) }}
{{- end }}
{{- end }}
{{- if and $v.metrics.enabled (eq (int64 $v.metrics.port) 8081) }}
{{- fail "metrics.port 8081 is the manager's health probe port: choose another (default 8443)" }}
{{- end }}
{{- $chartLabels := list "helm.sh/chart" "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" "app.kubernetes.io/part-of" "app.kubernetes.io/component" }}
{{- range $k, $_ := $v.manager.podLabels }}
{{- if has $k $chartLabels }}
{{- fail (printf "manager.podLabels: %s is a label the chart sets itself (the Deployment selects its pods by it): remove it" $k) }}
{{- end }}
{{- end }}
{{- range $k, $_ := $v.metrics.serviceMonitor.labels }}
{{- if has $k $chartLabels }}
{{- fail (printf "metrics.serviceMonitor.labels: %s is a label the chart sets itself: remove it" $k) }}
{{- end }}
{{- end }}
{{- if hasKey ($v.manager.podAnnotations | default dict) "kubectl.kubernetes.io/default-container" }}
{{- fail "manager.podAnnotations: kubectl.kubernetes.io/default-container is set by the chart: remove it" }}
{{- end }}
{{- if and $v.metrics.serviceMonitor.enabled (not $v.metrics.enabled) }}
{{- fail "metrics.serviceMonitor.enabled needs metrics.enabled: without metrics there is nothing to scrape" }}
{{- end }}
{{- if $v.manager.podDisruptionBudget.enabled }}
{{- $mu := $v.manager.podDisruptionBudget.maxUnavailable }}
{{- if eq (ternary (int64 (trimSuffix "%" (toString $mu))) (int64 $mu) (kindIs "string" $mu)) 0 }}
{{- fail "manager.podDisruptionBudget.maxUnavailable 0 would forbid every eviction of the manager and block node drains: use 1 or more" }}
{{- end }}
{{- end }}
{{- range $v.manager.extraEnv }}
{{- $name := toString (dig "name" "" .) }}
{{- if has $name (list "AWS_ACCESS_KEY_ID" "AWS_SECRET_ACCESS_KEY" "AWS_SESSION_TOKEN" "SSL_CERT_DIR") }}
{{- fail (printf "manager.extraEnv: %s is set by the chart (from store.credentialsSecret or store.caBundle): set those instead" $name) }}
{{- end }}
{{- if and (hasKey . "value") (regexMatch "(?i)(secret|token|password|passwd|credential|access_?key|private_?key|api_?key)" $name) }}
{{- fail (printf "manager.extraEnv: %s looks like a credential and would be written in the Deployment in clear: read it from a Secret (valueFrom.secretKeyRef) instead of value" $name) }}
{{- end }}
{{- end }}
{{- range $v.manager.extraArgs }}
{{- $flag := regexReplaceAll "^--([^=]*).*$" . "${1}" }}
{{- if has $flag (list "leader-elect" "leader-election-id" "health-probe-bind-address" "metrics-bind-address" "metrics-secure") }}
{{- fail (printf "manager.extraArgs: --%s is set by the chart from its values (manager.leaderElection, metrics): set those instead" $flag) }}
{{- end }}
{{- end }}
{{- end }}
