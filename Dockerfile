# The agentrewind image: one static binary, run as a non-root user on a read-only root filesystem.
#
# Build it with `make docker-build`, which builds bin/agentrewind and stages the CA bundle first.
# BASE_IMAGE defaults to scratch so the image builds on a machine that can pull nothing; production
# builds pass a distroless static non-root image from their own mirror.
ARG BASE_IMAGE=scratch
FROM ${BASE_IMAGE}
COPY bin/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY bin/agentrewind /agentrewind
# 65532 is the distroless "nonroot" user; scratch has no /etc/passwd, so the numeric form is used.
USER 65532:65532
ENTRYPOINT ["/agentrewind"]
