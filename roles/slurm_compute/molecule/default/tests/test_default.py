"""slurm_compute on the Molecule container: the node registers idle with its GPUs and runs a job."""


def test_node_is_idle_with_its_gpus(host):
    out = host.check_output("sinfo --noheader --Node --format='%N %T %G'")
    # (S:0): gres.conf binds the GPUs to the node's one socket (Cores=).
    assert out.split() == ["gcmol01", "idle", "gpu:h100:2(S:0)"]


def test_gpu_job_sees_its_devices(host):
    out = host.check_output("srun --gres=gpu:h100:2 printenv CUDA_VISIBLE_DEVICES")
    assert out.strip() == "0,1"


def test_slurmd_runs_at_boot(host):
    service = host.service("slurmd")
    assert service.is_running and service.is_enabled
