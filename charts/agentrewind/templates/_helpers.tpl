{{/* The chart's name, nameOverride if set. */}}
{{- define "agentrewind.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name: fullnameOverride, else the release name when it already holds the
chart's name (release "agentrewind" gives agentrewind-manager, the names config/default uses), else
<release>-<chart>.
*/}}
{{- define "agentrewind.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
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
