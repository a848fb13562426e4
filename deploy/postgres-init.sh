#!/bin/sh
# Training Camp's own database and user, separate from Temporal's.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" <<SQL
CREATE USER camp WITH PASSWORD '${CAMP_DB_PASSWORD}';
CREATE DATABASE training_camp OWNER camp;
SQL
