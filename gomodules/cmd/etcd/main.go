// Command etcd is the etcd server of Muster's local Kubernetes control plane,
// built from the etcd module that Kubernetes itself pins.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
