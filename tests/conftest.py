"""The root conftest: every folder under tests/ sees the fixtures of tests/helpers/common.py."""

from tests.helpers.common import *  # noqa: F403
