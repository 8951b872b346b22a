# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Errors the collection's module bodies raise; the module base turns them into fail_json.

DomainError: the input or the cluster is not what the task needs (a profile the GPU
does not offer, a team name that is not a DNS label). Its message names the
variable, the value and the fix; `details` are returned next to `msg`. Every domain's
own error (DesignError, QuantityError, TimeSlicingError, ...) derives from it, so a module
(GpuPlatformModule.execute) and a filter (plugin_utils/filter_errors.py) each translate
one class in one place. It is a ValueError too: callers that parse with `except ValueError`
keep working.

ApiError: the Kubernetes API refused or could not be reached. It names the verb,
the kind, the object and the server's message, with a hint where one is known.

ClientError (an ApiError): the client could not be created: the kubeconfig cannot be
loaded, or the first request (GET /version, kubernetes.core's discovery) failed. It
names what was tried (server, context, kubeconfig path; never a token), the cause
and the option to set.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def execute(module, body):
    """Run body(module) -> result dict and exit with it; a DomainError or ApiError is a fail_json
    with its message. The one translation of the collection's errors for modules: GpuPlatformModule
    uses it (adding kubernetes.core's own errors), and so does a module that needs no cluster
    (usage_report, export_files) without pulling in kubernetes.core."""
    try:
        result = body(module)
    except DomainError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    except ApiError as exc:
        module.fail_json(msg=str(exc), api_error=exc.to_dict())
    module.exit_json(**result)


class DomainError(ValueError):
    def __init__(self, msg, **details):
        super(DomainError, self).__init__(msg)
        self.msg = msg
        self.details = details


# What a person can do about a status code. 403 is filled in per request (verb, resource).
STATUS_HINTS = {
    401: "the credentials were refused: check the kubeconfig, token or client certificate",
    404: "it does not exist (for a custom resource: is its CRD installed?)",
    409: "it was changed or created by someone else meanwhile: run the task again",
    422: "the server refused the object as invalid: see the message for the field",
    429: "the API server is rate limiting: retried for a while, then gave up; run again later",
    500: "the API server failed: retried for a while, then gave up; check the API server",
    503: "the API server is unavailable: retried for a while, then gave up; check the API server",
}


class ApiError(Exception):
    """A failed Kubernetes API call, readable by a person."""

    def __init__(self, verb, kind, name=None, namespace=None, status=None, reason=None,
                 message=None, hint=None, url=None):
        self.verb = verb
        self.kind = kind
        self.name = name
        self.namespace = namespace
        self.status = status
        self.reason = reason
        self.message = message or ""
        self.hint = hint
        self.url = url
        super(ApiError, self).__init__(self.text())

    def target(self):
        what = self.kind
        if self.name:
            what += " %s" % self.name
        if self.namespace:
            what += " in namespace %s" % self.namespace
        return what

    def text(self):
        if self.status is None:
            head = "%s %s: cannot reach the API server%s" % (
                self.verb, self.target(), (" at %s" % self.url) if self.url else "")
        else:
            head = "%s %s: HTTP %s %s" % (self.verb, self.target(), self.status, self.reason or "")
            head = head.rstrip()
        text = head + (": %s" % self.message if self.message else "")
        if self.hint:
            text += " (%s)" % self.hint
        return text

    def to_dict(self):
        return dict(verb=self.verb, kind=self.kind, name=self.name, namespace=self.namespace,
                    status=self.status, reason=self.reason, message=self.message, hint=self.hint)


class ClientError(ApiError):
    """No client: credentials not loadable, or the API server not reachable with them."""

    def __init__(self, message, hint, status=None, reason=None, url=None, context=None, kubeconfig=None,
                 stage="connect"):
        self.context = context
        self.kubeconfig = kubeconfig
        self.stage = stage          # "load": reading the kubeconfig; "connect": GET /version
        super(ClientError, self).__init__("GET" if stage == "connect" else None, "/version", status=status,
                                          reason=reason, message=message, hint=hint, url=url)

    def where(self):
        parts = [("server %s" % self.url) if self.url else None,
                 ("context %s" % self.context) if self.context else None,
                 ("kubeconfig %s" % self.kubeconfig) if self.kubeconfig else None]
        return ", ".join(p for p in parts if p)

    def text(self):
        where = self.where()
        text = "Cannot connect to Kubernetes%s: " % ((" (%s)" % where) if where else "")
        if self.status is not None:
            text += ("HTTP %s %s" % (self.status, self.reason or "")).rstrip() + " on GET /version: "
        text += self.message
        if self.hint:
            text += " (%s)" % self.hint
        return text

    def to_dict(self):
        out = super(ClientError, self).to_dict()
        out.update(stage=self.stage, url=self.url, context=self.context, kubeconfig=self.kubeconfig)
        return out
