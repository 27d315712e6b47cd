"""The console's webhooks pages."""

from fastapi import APIRouter

router = APIRouter(prefix="/console", include_in_schema=False)
