from gpucluster.cli import main

main()
