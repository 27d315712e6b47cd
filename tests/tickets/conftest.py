from tests.claims.conftest import limiter

__all__ = ["limiter"]  # the claim tests' fixture: room for their claims from one address
