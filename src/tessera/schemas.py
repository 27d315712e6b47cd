"""Schema bases and shared field types.

Request bodies use strict scalars (``"10"`` is not an integer, ``1`` is not a boolean) so that a
wrong type is a 400 naming the field rather than a silent coercion. Query parameters are text by
nature and use plain ``int``.
"""

from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    EmailStr,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
)
from pydantic.alias_generators import to_camel


def normalize_email(email: str) -> str:
    """Emails compare case-insensitively: they are stored and matched lowercased."""
    return email.strip().lower()


# Unix timestamps in seconds (the spec's start_date, registered_at, ...).
UnixSeconds = Annotated[StrictInt, Field(gt=0, le=253402300799)]  # up to 9999-12-31
PositiveInt = Annotated[StrictInt, Field(ge=1, le=2**53)]
NonNegativeInt = Annotated[StrictInt, Field(ge=0, le=2**53)]
Bool = StrictBool
Email = Annotated[EmailStr, StringConstraints(max_length=320), AfterValidator(normalize_email)]
RefId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=255)]


class SnakeModel(BaseModel):
    """Product, event, sales and transfer resources: snake_case, as the spec writes them."""

    model_config = ConfigDict(from_attributes=True)


class CamelModel(BaseModel):
    """User resources: camelCase on the wire."""

    model_config = ConfigDict(from_attributes=True, alias_generator=to_camel, populate_by_name=True)


class Pagination(SnakeModel):
    page: int
    limit: int
    total: int


class PageParams(SnakeModel):
    """``page`` (from 1) and ``limit`` (1-100, default 20) of the paginated lists."""

    page: int = Field(default=1, ge=1, le=1_000_000)
    limit: int = Field(default=20, ge=1, le=100)

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.limit
