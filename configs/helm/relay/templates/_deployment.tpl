{{/*
One role's Deployment; call with (dict "root" $ "role" "edge"). Every
role runs the same image with its own subcommand and the ConfigMap's
<role>.yaml; the edge adds the Secret's edge-keys.yaml as a second
--config (merged over the first) and its resume token secret from the
environment; workers and coordinators read their providers' keys from
files of the Secret, which the kubelet updates in place on rotation.
*/}}
{{- define "relay.deployment" -}}
{{- $root := .root -}}
{{- $v := index $root.Values .role -}}
{{- $name := printf "%s-%s" (include "relay.fullname" $root) .role -}}
{{- $secretName := include "relay.fullname" $root -}}
{{- $edgeKeys := and (eq .role "edge") $root.Values.secret.edgeAPIKeys -}}
{{- $providerKeys := dict -}}
{{- if ne .role "edge" -}}
{{- $providerKeys = $root.Values.secret.providerKeys -}}
{{- end -}}
{{- $grace := 0 -}}
{{- if eq .role "worker" -}}
{{- $grace = add $v.drainTimeoutSeconds $v.shutdownMarginSeconds -}}
{{- else -}}
{{- $grace = $v.terminationGracePeriodSeconds -}}
{{- end -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  labels:
    {{- include "relay.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .role }}
spec:
  {{- if not (and (eq .role "worker") $v.autoscaling.enabled) }}
  replicas: {{ $v.replicas }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "relay.selector" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "relay.labels" $root | nindent 8 }}
        app.kubernetes.io/component: {{ .role }}
      annotations:
        # A changed configuration or Secret rolls the pods.
        checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
        checksum/secret: {{ include (print $root.Template.BasePath "/secret.yaml") $root | sha256sum }}
    spec:
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      # Covers the graceful stop: a worker's drain_timeout plus the handover.
      terminationGracePeriodSeconds: {{ $grace }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      containers:
        - name: {{ .role }}
          image: {{ include "relay.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args:
            - {{ .role }}
            - --config
            - {{ include "relay.configDir" $root }}/{{ .role }}.yaml
            {{- if $edgeKeys }}
            - --config
            - {{ include "relay.secretDir" $root }}/edge-keys.yaml
            {{- end }}
          {{- $podIP := include "relay.opsOnPodIP" . }}
          {{- $opsPort := include "relay.opsPort" . }}
          {{- if or (and (eq .role "edge") $root.Values.secret.resumeTokenSecret) $podIP }}
          env:
            {{- if and (eq .role "edge") $root.Values.secret.resumeTokenSecret }}
            - name: RELAY_EDGE__RESUME_TOKEN_SECRET
              valueFrom:
                secretKeyRef:
                  name: {{ $secretName }}
                  key: resume-token-secret
            {{- end }}
            {{- if $podIP }}
            # Scraped by the ServiceMonitor: the ops listener on the pod's
            # IP, not on every interface.
            - name: POD_IP
              valueFrom:
                fieldRef: {fieldPath: status.podIP}
            - name: RELAY_{{ upper .role }}__LISTEN
              value: "$(POD_IP):{{ $opsPort }}"
            {{- end }}
          {{- end }}
          {{- if or (eq .role "edge") $podIP }}
          ports:
            - name: http
              containerPort: {{ $v.port }}
              protocol: TCP
          {{- end }}
          {{- if $podIP }}
          livenessProbe:
            httpGet: {path: /healthz, port: http}
            periodSeconds: 10
            failureThreshold: 3
          readinessProbe:
            httpGet: {path: /readyz, port: http}
            periodSeconds: 5
            failureThreshold: 2
          {{- else }}
          # The ops listener is on loopback, which the kubelet's HTTP probes
          # cannot reach: the relay binary probes it from inside (the image
          # has no shell or curl). The edge's is outside the API's
          # connection cap, so a full edge is not restarted.
          livenessProbe:
            exec:
              command: [/usr/local/bin/relay, probe, "http://127.0.0.1:{{ $opsPort }}/healthz"]
            periodSeconds: 10
            timeoutSeconds: 5
            failureThreshold: 3
          readinessProbe:
            exec:
              command: [/usr/local/bin/relay, probe, "http://127.0.0.1:{{ $opsPort }}/readyz"]
            periodSeconds: 5
            timeoutSeconds: 5
            failureThreshold: 2
          {{- end }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          volumeMounts:
            - {name: config, mountPath: {{ include "relay.configDir" $root }}, readOnly: true}
            - {name: tmp, mountPath: /tmp}
            {{- if or $edgeKeys $providerKeys }}
            - {name: secret, mountPath: {{ include "relay.secretDir" $root }}, readOnly: true}
            {{- end }}
            {{- if $root.Values.nats.credsSecret }}
            - {name: nats-creds, mountPath: /etc/relay/nats, readOnly: true}
            {{- end }}
      volumes:
        - name: config
          configMap:
            name: {{ include "relay.fullname" $root }}
            items:
              - {key: {{ .role }}.yaml, path: {{ .role }}.yaml}
        - name: tmp
          emptyDir: {}
        {{- if or $edgeKeys $providerKeys }}
        - name: secret
          secret:
            secretName: {{ $secretName }}
            items:
              {{- if $edgeKeys }}
              - {key: edge-keys.yaml, path: edge-keys.yaml}
              {{- end }}
              {{- range $provider, $_ := $providerKeys }}
              - {key: {{ include "relay.providerKey" $provider }}, path: {{ include "relay.providerKey" $provider }}}
              {{- end }}
        {{- end }}
        {{- if $root.Values.nats.credsSecret }}
        - name: nats-creds
          secret:
            secretName: {{ $root.Values.nats.credsSecret }}
            items:
              - {key: {{ $root.Values.nats.credsKey }}, path: nats.creds}
        {{- end }}
      {{- with $v.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}
