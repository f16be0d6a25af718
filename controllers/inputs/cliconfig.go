package inputs

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/cluster-api-provider-terraform/api/v1alpha1"
)

// CheckCLIConfig reads, through reader (the engine passes the live API reader), every source
// spec.job.cliConfig names: the CLI configuration file's Secret or ConfigMap and each
// credential's Secret. The Job hands them to the kubelet, which would read any Secret of the
// namespace, so each must carry the opt-in label variablesFrom sources carry
// (VariablesSourceNotOptedIn otherwise, as for them), exist (InputsSourceMissing) and hold its
// key (InvalidInputs). Those come back as *InputsError; an API error comes back wrapped. No
// value is read into a message or a log line.
func CheckCLIConfig(ctx context.Context, reader client.Reader, namespace string, c *infrav1.CLIConfig) error {
	if c == nil {
		return nil
	}
	if r := c.SecretRef; r != nil {
		if err := checkCLISource(ctx, reader, namespace, "spec.job.cliConfig.secretRef", &corev1.Secret{}, *r); err != nil {
			return err
		}
	}
	if r := c.ConfigMapRef; r != nil {
		if err := checkCLISource(ctx, reader, namespace, "spec.job.cliConfig.configMapRef", &corev1.ConfigMap{}, *r); err != nil {
			return err
		}
	}
	for i, cred := range c.Credentials {
		where := fmt.Sprintf("spec.job.cliConfig.credentials[%d] (host %s)", i, cred.Host)
		if err := checkCLISource(ctx, reader, namespace, where, &corev1.Secret{}, cred.SecretKeyRef); err != nil {
			return err
		}
	}
	return nil
}

// checkCLISource reads one Secret or ConfigMap (obj says which) and checks its opt-in label and
// its key.
func checkCLISource(ctx context.Context, reader client.Reader, namespace, field string, obj client.Object, ref infrav1.CLIConfigKeyRef) error {
	kind := "Secret"
	if _, ok := obj.(*corev1.ConfigMap); ok {
		kind = "ConfigMap"
	}
	where := fmt.Sprintf("%s (%s %s/%s)", field, kind, namespace, ref.Name)
	if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return &InputsError{Reason: infrav1.InputsSourceMissingReason, Message: where + " does not exist; create it"}
		}
		return fmt.Errorf("read %s: %w", where, err)
	}
	if !optedIn(obj) {
		return notOptedIn(where, kind, namespace, ref.Name, obj)
	}
	if !hasKey(obj, ref.Key) {
		return invalidf("%s has no key %q", where, ref.Key)
	}
	return nil
}

func hasKey(obj metav1.Object, key string) bool {
	switch o := obj.(type) {
	case *corev1.Secret:
		_, ok := o.Data[key]
		return ok
	case *corev1.ConfigMap:
		_, inData := o.Data[key]
		_, inBinary := o.BinaryData[key]
		return inData || inBinary
	}
	return false
}
