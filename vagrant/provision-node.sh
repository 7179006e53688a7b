#!/bin/bash
# Provision one VM of vagrant/Vagrantfile with the local cluster's own scripts.
# Usage: provision-node.sh controller|compute NCOMPUTE GPUS_PER_NODE NET_PREFIX
set -euo pipefail
role=$1; ncompute=$2; gpus=$3; net=$4
src=/srv/tiresias-slurm
prov=$src/slurm_plugin/localcluster/provision
shared=$src/vagrant/.shared          # munge key handed from the controller to the nodes
mkdir -p "$shared" /etc/slurm

bash "$prov/install.sh" --role "$role"
if [ "$role" = controller ]; then
  [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
  install -m 400 /etc/munge/munge.key "$shared/munge.key"
  bash "$prov/munge.sh"
else
  bash "$prov/munge.sh" "$shared/munge.key"
fi
# fake GPUs: the same character devices the local cluster uses
bash "$prov/fakegpu.sh" /var/lib/dlcluster/vm/dev "$gpus"
# hosts file so that every VM resolves the others
grep -q " ctl$" /etc/hosts || echo "$net.10 ctl" >> /etc/hosts
for i in $(seq 1 "$ncompute"); do grep -q " node$i$" /etc/hosts || echo "$net.$((10 + i)) node$i" >> /etc/hosts; done
# slurm.conf/gres.conf/job_submit.lua from the templates beside this script
half=$((gpus / 2))
sed -e "s/@NCOMPUTE@/$ncompute/g" -e "s/@GPUS@/$gpus/g" "$src/vagrant/slurm.conf.in" > /etc/slurm/slurm.conf
: > /etc/slurm/gres.conf
for g in $(seq 0 $((gpus - 1))); do
  links=""; for o in $(seq 0 $((gpus - 1))); do
    if [ "$g" = "$o" ]; then l=-1; elif [ $((g / half)) = $((o / half)) ]; then l=4; else l=1; fi
    links="${links:+$links,}$l"; done
  cores=$([ "$g" -lt "$half" ] && echo 0-7 || echo 8-15)
  echo "NodeName=node[1-$ncompute] Name=gpu Type=a100 File=/var/lib/dlcluster/vm/dev/nvidia$g Cores=$cores Links=$links" >> /etc/slurm/gres.conf
done
cp "$src/slurm_plugin/job_submit.lua" /etc/slurm/job_submit.lua
mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
if [ "$role" = controller ]; then
  pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld
else
  pgrep -x slurmd >/dev/null || /usr/sbin/slurmd
fi
