"""The pure pieces more than one service needs: the cluster file read into wire types, wire specs translated
into the core's types, Kubernetes quantities and pod resources, the preemptibility rule."""
