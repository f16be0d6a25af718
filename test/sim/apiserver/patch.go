package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// errApplyNotModelled is returned for server-side apply, which the store does not model.
var errApplyNotModelled = apierrors.NewBadRequest("server-side apply (application/apply-patch+yaml) is not modelled by test/sim/apiserver: use a merge, JSON or strategic merge patch")

// patch applies a patch to the stored object (of the main resource or the status subresource)
// and stores the result through the update path: a resourceVersion in the patch is a
// precondition (Conflict when stale); without one the patch applies to the current state.
func (s *Store) patch(ctx context.Context, req *Request, gvk schema.GroupVersionKind, ns, name string, pt types.PatchType, data []byte, subresource string) (client.Object, error) {
	if pt == types.ApplyPatchType || pt == types.ApplyCBORPatchType {
		return nil, errApplyNotModelled
	}
	return s.write(ctx, req, gvk, ns, name, subresource, false, func(r *resource, old client.Object) (client.Object, error) {
		orig, err := json.Marshal(old)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("encode %s: %w", r.gvk.Kind, err))
		}
		patched, err := applyPatch(r, pt, orig, data)
		if err != nil {
			return nil, err
		}
		cand := r.newObject()
		if err := json.Unmarshal(patched, cand); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("decode patched %s: %v", r.gvk.Kind, err))
		}
		if cand.GetName() != name || (!r.policy.ClusterScoped && cand.GetNamespace() != ns) {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", cand.GetName(), name))
		}
		if cand.GetResourceVersion() == "" {
			cand.SetResourceVersion(old.GetResourceVersion())
		}
		return cand, nil
	})
}

// applyPatch applies one patch document as the real server's patch handler does, with its
// error kinds: a malformed patch is BadRequest, a JSON patch that does not apply is 422, and a
// strategic merge patch of a custom resource is 415.
func applyPatch(r *resource, pt types.PatchType, orig, data []byte) ([]byte, error) {
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(data)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		out, err := p.Apply(orig)
		if err != nil {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
		return out, nil
	case types.MergePatchType:
		out, err := jsonpatch.MergePatch(orig, data)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return out, nil
	case types.StrategicMergePatchType:
		if r.policy.Custom {
			return nil, unsupportedPatch(pt)
		}
		out, err := strategicpatch.StrategicMergePatch(orig, data, r.newObject())
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		return out, nil
	default:
		return nil, unsupportedPatch(pt)
	}
}

// unsupportedPatch is the server's 415 for a patch type the resource does not accept.
func unsupportedPatch(pt types.PatchType) error {
	return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", schema.GroupResource{}, "",
		fmt.Sprintf("the body of the request was in an unknown format - patch type %s is not accepted", pt), 0, false)
}
