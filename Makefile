# gpucluster developer targets. Each target is self-contained; run from the repository root.
PYTHON ?= python3

# Roles with a Molecule scenario, in dependency order.
MOLECULE_ROLES ?= gpu_driver munge slurm_common slurm_dbd slurm_controller slurm_compute slurm_health slurm_accounts slurm_login slurm_node_ssh slurm_restd users nfs_server shared_storage

.PHONY: molecule
## molecule: run every Molecule scenario of every role on Slurm 26.05, and gpu_driver's default scenario on 24.11 and 22.05 too (podman, lab images built or reused, needs root)
molecule:
	@set -e; \
	conf=$$($(PYTHON) -m gpucluster.lab.image --containers-conf); \
	for role in $(MOLECULE_ROLES); do \
	  for scenario in $$(cd roles/$$role/molecule && ls -d */ | tr -d /); do \
	    releases=26.05; \
	    [ "$$role/$$scenario" = gpu_driver/default ] && releases="26.05 24.11 22.05"; \
	    for release in $$releases; do \
	      image=$$($(PYTHON) -m gpucluster.lab.image --release $$release); \
	      echo "== molecule test: $$role ($$scenario, Slurm $$release)"; \
	      CONTAINERS_CONF=$$conf podman rm --force --ignore gcmol01 gchealth01 gclogin01 gcrest01 gcnodessh01 gccfgnode gccfgctl gcdrv01 gcnvd01 >/dev/null; \
	      state=$$(mktemp -d); \
	      (cd roles/$$role && MOLECULE_EPHEMERAL_DIRECTORY=$$state GPUCLUSTER_LAB_IMAGE=$$image GPUCLUSTER_SLURM_RELEASE=$$release CONTAINERS_CONF=$$conf molecule test --scenario-name $$scenario); \
	      rm -rf $$state; \
	    done; \
	  done; \
	done
