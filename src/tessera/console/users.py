"""The console's users pages."""

from fastapi import APIRouter

router = APIRouter(prefix="/console", include_in_schema=False)
