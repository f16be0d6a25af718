// Command terraform-provider-echo is the smallest real provider the tests install from a
// provider network mirror (test/tfregistry): one data source, echo, whose output is
// "echo: " and its input, and one resource, echo_file, a file on the machine that runs the Job:
// the tests' "world", whose every create, update and delete is appended to world.log in the
// file's folder (a line "<verb> <file name>"), so a test tells a resource kept in the world from
// one destroyed. hack/build-bin.sh echo-provider builds it with
// terraform-plugin-framework from the Go module proxy into the tool cache; it is a module of its
// own (this folder's go.mod), so CAPTF's go.mod does not depend on the framework.
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	pschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type echoProvider struct{}

func (p *echoProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "echo"
	resp.Version = "1.0.0"
}
func (p *echoProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = pschema.Schema{}
}
func (p *echoProvider) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {
}
func (p *echoProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return &fileResource{} }}
}
func (p *echoProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{func() datasource.DataSource { return &echoData{} }}
}

type echoData struct{}
type echoModel struct {
	Input  types.String `tfsdk:"input"`
	Output types.String `tfsdk:"output"`
}

func (d *echoData) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName
}
func (d *echoData) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{Attributes: map[string]schema.Attribute{
		"input":  schema.StringAttribute{Required: true},
		"output": schema.StringAttribute{Computed: true},
	}}
}
func (d *echoData) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m echoModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	m.Output = types.StringValue("echo: " + m.Input.ValueString())
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// fileResource is echo_file: path (a new path replaces the file), content, and id (the path).
type fileResource struct{}
type fileModel struct {
	ID      types.String `tfsdk:"id"`
	Path    types.String `tfsdk:"path"`
	Content types.String `tfsdk:"content"`
}

func (r *fileResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_file"
}
func (r *fileResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = rschema.Schema{Attributes: map[string]rschema.Attribute{
		"id": rschema.StringAttribute{Computed: true,
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		"path": rschema.StringAttribute{Required: true,
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
		"content": rschema.StringAttribute{Required: true},
	}}
}

// world writes or removes the file and appends the verb to the world log beside it.
func world(verb, path string, content *string) error {
	var err error
	if content != nil {
		err = os.WriteFile(path, []byte(*content), 0o644)
	} else if err = os.Remove(path); errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(filepath.Dir(path), "world.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s %s\n", verb, filepath.Base(path))
	return errors.Join(err, f.Close())
}

// write carries out a create or an update of the planned file, and stores the plan as the
// state.
func write(ctx context.Context, verb string, plan tfsdk.Plan, state *tfsdk.State, diags *diag.Diagnostics) {
	var m fileModel
	diags.Append(plan.Get(ctx, &m)...)
	if diags.HasError() {
		return
	}
	content := m.Content.ValueString()
	if err := world(verb, m.Path.ValueString(), &content); err != nil {
		diags.AddError(verb+" the file", err.Error())
		return
	}
	m.ID = m.Path
	diags.Append(state.Set(ctx, &m)...)
}

func (r *fileResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	write(ctx, "create", req.Plan, &resp.State, &resp.Diagnostics)
}

func (r *fileResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m fileModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	b, err := os.ReadFile(m.Path.ValueString())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		resp.State.RemoveResource(ctx)
		return
	case err != nil:
		resp.Diagnostics.AddError("read the file", err.Error())
		return
	}
	m.Content = types.StringValue(string(b))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
func (r *fileResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	write(ctx, "update", req.Plan, &resp.State, &resp.Diagnostics)
}

func (r *fileResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m fileModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := world("delete", m.Path.ValueString(), nil); err != nil {
		resp.Diagnostics.AddError("delete the file", err.Error())
	}
}

func main() {
	err := providerserver.Serve(context.Background(), func() provider.Provider { return &echoProvider{} },
		providerserver.ServeOpts{Address: "providers.captf.test/captf-test/echo"})
	if err != nil {
		log.Fatal(err)
	}
}
