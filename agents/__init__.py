"""igniter-agent: runs MPS-partitioned inference servers on a GPU VM, keeps them alive, reports them."""
