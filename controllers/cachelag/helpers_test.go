package cachelag_test

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/cluster-api-provider-terraform/test/envtest"
)

func get[T client.Object](o T) T { return envtest.Get(kit, o) }

func update[T client.Object](o T, fn func(T)) { envtest.Update(kit, o, fn) }
