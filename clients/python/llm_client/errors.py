"""The exceptions of llm_client.

Every error the package raises is an LlmError. A failed gRPC call becomes the
subclass of its status code (from_rpc_error), with the service's own message,
the method and the address it was sent to; a bad argument given to the
package itself (a sampling parameter out of range, an empty stop string, a
prompt that fills the context) is an InvalidArgument that names it, before
any call is made.
"""

from __future__ import annotations


class LlmError(Exception):
    """An error of the services or of a request to them.

    code: the gRPC status code's name ("UNAVAILABLE", ...), or None for an
    error found by the package itself; details: the message; method: the RPC
    ("llm.v1.Model/Prefill"), or None; address: where it was sent, or None.
    """

    def __init__(self, details: str, *, code: str | None = None, method: str | None = None,
                 address: str | None = None, param: str | None = None):
        self.details = details
        self.code = code
        self.method = method
        self.address = address
        self.param = param
        where = ""
        if method:
            where = f" ({method}" + (f" at {address}" if address else "") + ")"
        super().__init__(f"{code}: {details}{where}" if code else f"{details}{where}")


class InvalidArgument(LlmError, ValueError):
    """A bad request: INVALID_ARGUMENT or OUT_OF_RANGE from a service, or a bad
    argument found before any call (`param` names it)."""


class Unavailable(LlmError):
    """A service cannot be reached or did not answer in time (UNAVAILABLE,
    DEADLINE_EXCEEDED): retry later or elsewhere."""


class ResourceExhausted(LlmError):
    """The model service is out of sessions, KV cache or streams, or the
    request is over a size limit (RESOURCE_EXHAUSTED): retry later."""


class SessionNotFound(LlmError):
    """The model session expired, was evicted, or its server restarted
    (NOT_FOUND)."""


class Unsupported(LlmError):
    """What was asked needs what this installation or these services lack:
    structured output without the grammar engine's library
    (libllm_constrain.so: llm_client/constrain.py), from a model service that
    does not apply token masks (ModelInfo.token_mask) or a tokenizer service
    that does not return token pieces."""


class Cancelled(LlmError):
    """The call was cancelled (CANCELLED)."""


class Unauthenticated(LlmError):
    """A missing or wrong bearer token (UNAUTHENTICATED, PERMISSION_DENIED)."""


_BY_CODE = {
    "INVALID_ARGUMENT": InvalidArgument,
    "OUT_OF_RANGE": InvalidArgument,
    "FAILED_PRECONDITION": InvalidArgument,
    "UNAVAILABLE": Unavailable,
    "DEADLINE_EXCEEDED": Unavailable,
    "RESOURCE_EXHAUSTED": ResourceExhausted,
    "NOT_FOUND": SessionNotFound,
    "CANCELLED": Cancelled,
    "UNAUTHENTICATED": Unauthenticated,
    "PERMISSION_DENIED": Unauthenticated,
}


def error_of_code(code: str, details: str, *, method: str | None = None,
                  address: str | None = None, param: str | None = None) -> LlmError:
    """The LlmError subclass of a status code's name ("INVALID_ARGUMENT")."""
    return _BY_CODE.get(code, LlmError)(details, code=code, method=method, address=address,
                                        param=param)


def from_rpc_error(error, method: str, address: str | None) -> LlmError:
    """The LlmError for a grpc.RpcError raised by `method` at `address`."""
    try:
        code = error.code().name
        details = error.details() or ""
    except AttributeError:  # not a call's error (e.g. a channel's)
        code, details = "UNKNOWN", str(error)
    return error_of_code(code, details, method=method, address=address)
