#!/bin/sh
# Copy a file into a backup directory, keeping its name: backup.sh FILE DIR
set -e
src=$1
dir=$2
mkdir -p $dir
cp $src $dir/
echo "backed up $src to $dir"
