{{/* Labels on every object's metadata: the Kustomize base's part-of label plus Helm's own. */}}
{{- define "muster.labels" -}}
app.kubernetes.io/part-of: muster
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "muster.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Pod-level security: UID 10001 as in the Dockerfile, the `restricted` Pod Security Standard. */}}
{{- define "muster.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  fsGroup: 10001
  seccompProfile: {type: RuntimeDefault}
{{- end }}

{{- define "muster.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  capabilities: {drop: [ALL]}
  seccompProfile: {type: RuntimeDefault}
{{- end }}

{{- define "muster.imageFields" -}}
image: {{ include "muster.image" . }}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end }}

{{- define "muster.pullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* /healthz answers once a service's views have caught up with their topics. */}}
{{- define "muster.probes" -}}
startupProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 5
  failureThreshold: 60
readinessProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 10
  timeoutSeconds: 3
livenessProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 20
  timeoutSeconds: 5
  failureThreshold: 3
{{- end }}

{{- define "muster.scrapeAnnotations" -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.httpPort | quote }}
prometheus.io/path: /metrics
checksum/config: {{ include (print $.Template.BasePath "/config.yaml") . | sha256sum | trunc 16 }}
{{- end }}

{{- define "muster.args" -}}
args: [serve, {{ .service }}, --http-host, 0.0.0.0, --http-port, {{ .root.Values.httpPort | quote }}{{ range .extra }}, {{ . }}{{ end }}]
ports:
  - {name: http, containerPort: {{ .root.Values.httpPort }}, protocol: TCP}
{{- end }}

{{/* Kafka settings (ConfigMap), telemetry settings, Kafka credentials (optional Secret); for the services
also who may read /metrics (ConfigMap) and its bearer token (optional Secret). */}}
{{- define "muster.envFrom" -}}
envFrom:
  - configMapRef: {name: muster-kafka}
{{- if .scheduler }}
  - configMapRef: {name: muster-scheduler}
{{- end }}
  - configMapRef: {name: muster-telemetry}
  - secretRef: {name: {{ .root.Values.secrets.kafkaCredentials }}, optional: true}
{{- if not .job }}
  - configMapRef: {name: muster-metrics}
  - secretRef: {name: {{ .root.Values.secrets.metricsToken }}, optional: true}
{{- end }}
{{- end }}

{{- define "muster.kafkaTlsVolume" -}}
- name: kafka-tls
  secret: {secretName: {{ .Values.secrets.kafkaTls }}, optional: true}
{{- end }}
