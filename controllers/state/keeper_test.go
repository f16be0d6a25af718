package state

import (
	"testing"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
	"github.com/captf/cluster-api-provider-terraform/controllers/decide"
	"github.com/captf/cluster-api-provider-terraform/controllers/naming"
)

// TestRetainedRolesAreTheNamesHandedOver: what a Retain or an abandon hands over by name (the
// engine, Names) and by role (the plugin's listing, Retained) is the same set of Secrets.
func TestRetainedRolesAreTheNamesHandedOver(t *testing.T) {
	names := Names("s1", []decide.BackupView{{Name: naming.StateBackupSecretName("s1", 3)}})
	want := []string{naming.StateSecretName("s1"), naming.InputsSecretName("s1"), naming.StateBackupSecretName("s1", 3)}
	if len(names) != len(want) {
		t.Fatalf("Names = %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Errorf("Names[%d] = %s, want %s", i, names[i], want[i])
		}
	}
	for role, kept := range map[string]bool{
		infrav1.SecretRoleState: true, infrav1.SecretRoleStateBackup: true, infrav1.SecretRoleInputs: true,
		infrav1.SecretRoleOutputs: false, infrav1.SecretRolePlan: false, "": false,
	} {
		if Retained(role) != kept {
			t.Errorf("Retained(%q) = %v, want %v", role, !kept, kept)
		}
	}
}
