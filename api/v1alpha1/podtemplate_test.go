package v1alpha1_test

import (
	"reflect"
	"strings"
	"testing"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// forbiddenPodFields are the JSON field names through which a pod gets the node's namespaces,
// a host folder, privileges or a Kubernetes credential.
var forbiddenPodFields = []string{"hostNetwork", "hostPID", "hostIPC", "hostUsers", "hostPath", "privileged", "securityContext",
	"serviceAccount", "serviceAccountName", "automountServiceAccountToken", "projected", "serviceAccountToken", "capabilities",
	"allowPrivilegeEscalation", "containers", "initContainers", "ephemeralContainers", "nodeName", "csi", "ephemeral", "persistentVolumeClaim"}

// TestRunnerPodTemplateCannotCarryHostAccess walks every field RunnerPodTemplate can hold, down
// through the Kubernetes types it embeds (tolerations, affinity, key paths), and fails if one of
// them is a field that could carry host access, privileges or a credential: the field docs
// promise that the template cannot express them, so adding one must fail here first.
func TestRunnerPodTemplateCannotCarryHostAccess(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type, string)
	walk = func(typ reflect.Type, at string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			for _, bad := range forbiddenPodFields {
				if strings.EqualFold(name, bad) {
					t.Errorf("%s.%s (%s) could carry host access, privileges or a credential: RunnerPodTemplate must not grow it", at, name, typ)
				}
			}
			walk(f.Type, at+"."+name)
		}
	}
	walk(reflect.TypeFor[infrav1.RunnerPodTemplate](), "podTemplate")
	if len(seen) < 10 {
		t.Fatalf("walked only %d types: the walk does not reach the embedded Kubernetes types", len(seen))
	}
}
