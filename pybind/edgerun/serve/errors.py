"""OpenAI-style errors: every failure a client can cause is answered with
{"error": {"message", "type", "param", "code"}} and a 4xx status, the shape the
openai client library turns into its typed exceptions (BadRequestError,
RateLimitError, ...)."""


class APIError(Exception):
    """A request the server answers with `status` and an OpenAI error body."""

    def __init__(self, status, message, type="invalid_request_error", param=None, code=None, headers=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = dict(headers or {})

    def body(self):
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad_request(message, param=None, code=None):
    return APIError(400, message, param=param, code=code)


def error_body(message, type="server_error", code=None):
    return {"error": {"message": message, "type": type, "param": None, "code": code}}
