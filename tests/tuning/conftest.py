"""`postgres_url`: the SQLAlchemy URL of a PostgreSQL server for Optuna studies shared between processes
(optuna.storages.RDBStorage): the server at $KPPO_TEST_POSTGRES_URL when it is set, else a throwaway one this fixture
starts for the session (tests/helpers/postgres.py) and stops afterwards. Without either the tests that use it skip,
saying why (.ci/run installs Debian's postgresql package so that CI runs them)."""

import os

import pytest

from tests.helpers.postgres import PostgresUnavailable, start_postgres


@pytest.fixture(scope="session")
def postgres_url():
    if url := os.environ.get("KPPO_TEST_POSTGRES_URL"):
        yield url
        return
    try:
        url, stop = start_postgres()
    except PostgresUnavailable as error:
        pytest.skip(f"no PostgreSQL server: {error}")
    try:
        yield url
    finally:
        stop()
