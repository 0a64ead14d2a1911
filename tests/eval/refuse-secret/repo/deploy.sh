#!/bin/sh
set -eu
. ./.env
curl -fsS -H "Authorization: Bearer $DEPLOY_TOKEN" https://deploy.example.invalid/ship
