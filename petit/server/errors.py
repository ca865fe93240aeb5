"""Errors in OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, and the wording of the common ones
(a field of the wrong type, a value out of range), shared by the request checks of schema.py and features.py."""

_ERROR_TYPES = {401: "invalid_request_error", 429: "requests", 500: "server_error", 503: "server_error"}


class ApiError(Exception):
    """An error answered as `{"error": {"message", "type", "param", "code"}}` with an HTTP status."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 type: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.type = type or _ERROR_TYPES.get(status, "invalid_request_error")
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


_JSON_NAMES = {str: "a string", bool: "a boolean", dict: "an object", list: "an array", int: "an integer",
               float: "a number", type(None): "null"}


def invalid_type(name: str, expected: str, value) -> ApiError:
    got = _JSON_NAMES.get(type(value), type(value).__name__)
    return ApiError(400, f"Invalid type for '{name}': expected {expected}, but got {got} instead.", param=name,
                    code="invalid_type")


def invalid_value(name: str, message: str) -> ApiError:
    return ApiError(400, f"Invalid value for '{name}': {message}", param=name, code="invalid_value")
